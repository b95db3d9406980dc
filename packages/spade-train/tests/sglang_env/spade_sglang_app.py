"""SGLang 0.5.23's own HTTP app with only its engine replaced (run in the SGLang test env).

``python -m spade_sglang_app <the flags of sglang.launch_server>``: the flags are parsed by
SGLang's own ``prepare_server_args`` (so a flag the ray backend passes that SGLang lacks fails
here), the parsed config is published as SGLang's tokenizer process publishes it, and
``sglang.srt.entrypoints.http_server.app`` (its routes, request types, validation and error
handling) is served by uvicorn. Behind it, in place of the TokenizerManager (which would talk to
the GPU scheduler), :class:`StandinTokenizerManager` answers from
:class:`~spade_standin_engine.StandinEngine`; process groups for weight updates are made by
SGLang's own ``init_custom_process_group`` and tensors read by its ``MultiprocessingSerializer``.
"""

from __future__ import annotations

import asyncio
import sys
import time
from types import SimpleNamespace
from typing import Any

from spade_standin_engine import StandinEngine


class StandinTokenizerManager:
    """The TokenizerManager surface the native endpoints use, over the stand-in engine."""

    def __init__(self, server_args: Any, engine: StandinEngine) -> None:
        from sglang.srt.managers.tokenizer_manager import ServerStatus

        self.server_args = server_args
        self.engine = engine
        self.model_path = server_args.model_path
        self.served_model_name = server_args.model_path
        self.is_generation = True
        self.gracefully_exit = False
        self.server_status = ServerStatus.Up
        self.last_receive_tstamp = time.time()
        self.rid_to_state: dict[str, Any] = {}
        self.startup_time = time.time()
        self.model_config = SimpleNamespace(
            is_image_understandable_model=False,
            is_audio_understandable_model=False,
            hf_config=SimpleNamespace(model_type="qwen3", architectures=["Qwen3ForCausalLM"]),
        )
        self.requests: list[dict[str, Any]] = []

    def is_ready(self) -> bool:
        return True

    def config_value(self, name: str) -> Any:
        if name == "weight_version":
            return self.engine.version
        return getattr(self.server_args, name, None)

    async def get_internal_state(self) -> list[dict[str, Any]]:
        return [{"served": self.engine.served, "aborted": self.engine.aborted}]

    async def generate_request(self, obj: Any, request: Any = None):
        obj.normalize_batch_and_arguments()
        self.requests.append({"rid": obj.rid, "sampling_params": obj.sampling_params})
        out = await asyncio.to_thread(
            self.engine.generate, list(obj.input_ids), dict(obj.sampling_params or {}), str(obj.rid)
        )
        self.last_receive_tstamp = time.time()
        yield out

    def create_abort_task(self, obj: Any) -> None:
        return None

    async def flush_cache(self, timeout_s: float = 0.0) -> Any:
        return SimpleNamespace(success=True, message="")

    async def pause_generation(self, obj: Any) -> None:
        self.engine.pause(obj.mode)

    async def continue_generation(self, obj: Any) -> None:
        self.engine.resume()

    def abort_request(self, rid: str = "", abort_all: bool = False) -> None:
        if abort_all:
            self.engine.pause("abort")
            self.engine.resume()

    async def init_weights_update_group(self, obj: Any, request: Any = None) -> tuple[bool, str]:
        from sglang.srt.utils.common import init_custom_process_group

        body = {
            k: getattr(obj, k)
            for k in (
                "master_address",
                "master_port",
                "rank_offset",
                "world_size",
                "group_name",
                "backend",
            )
        }
        try:
            await asyncio.to_thread(self.engine.init_group, body, init_custom_process_group)
        except Exception as exc:  # noqa: BLE001
            return False, f"Failed to initialize custom process group: {exc}."
        return True, "Succeeded to initialize custom process group."

    async def destroy_weights_update_group(self, obj: Any, request: Any = None) -> tuple[bool, str]:
        self.engine.destroy_group(obj.group_name)
        return True, "Succeeded to destroy custom process group."

    async def update_weights_from_distributed(
        self, obj: Any, request: Any = None
    ) -> tuple[bool, str]:
        body = {"names": obj.names, "dtypes": obj.dtypes, "shapes": obj.shapes,
                "group_name": obj.group_name, "weight_version": obj.weight_version}  # fmt: skip
        try:
            await asyncio.to_thread(self.engine.update_distributed, body)
        except Exception as exc:  # noqa: BLE001
            return False, f"Failed to update parameter online: {exc}"
        return True, "Succeeded to update parameter online."

    async def update_weights_from_tensor(self, obj: Any, request: Any = None) -> tuple[bool, str]:
        from sglang.srt.utils.common import MultiprocessingSerializer

        named = MultiprocessingSerializer.deserialize(obj.serialized_named_tensors[0])
        self.engine._load(list(named), obj.weight_version)
        return True, "Success"

    async def update_weights_from_disk(
        self, obj: Any, request: Any = None
    ) -> tuple[bool, str, int]:
        body = {"model_path": obj.model_path, "weight_version": obj.weight_version}
        try:
            await asyncio.to_thread(self.engine.update_disk, body)
        except Exception as exc:  # noqa: BLE001
            return False, f"Failed to update weights: {exc}", 0
        return True, "Succeeded to update model weights.", 0

    async def update_weight_version(self, obj: Any) -> None:
        self.engine.version = obj.new_version

    async def release_memory_occupation(self, obj: Any, request: Any = None) -> None:
        return None

    async def resume_memory_occupation(self, obj: Any, request: Any = None) -> None:
        return None


def main(argv: list[str]) -> None:
    import uvicorn
    from sglang.srt.entrypoints import http_server
    from sglang.srt.runtime_context import publish
    from sglang.srt.server_args import prepare_server_args

    server_args = prepare_server_args(argv)  # SGLang's parser: an unknown flag fails here
    # The stand-in engine runs on CPU: the resolution of GPU-only settings (the device, the
    # batch-invariant kernels of deterministic inference) is not what is under test here.
    server_args.device = "cpu"
    server_args.enable_deterministic_inference = False
    publish(server_args, role="tokenizer")
    engine = StandinEngine(
        server_args.model_path, server_args.weight_version, server_args.context_length
    )
    manager = StandinTokenizerManager(server_args, engine)
    http_server.set_global_state(
        http_server._GlobalState(
            tokenizer_manager=manager, template_manager=None, scheduler_info={}
        )
    )
    uvicorn.run(http_server.app, host=server_args.host, port=server_args.port, lifespan="off",
                log_level="warning")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
