"""The generation launcher run inside a working copy of an ACEBench checkout.

ACEBench routes a model to an API by its name and has no route for a name it does not know;
instead of editing its files, this program (run with ACEBench's interpreter, in the copy) adds
the evaluated model under a label that contains "qwen", sends that label's requests to
``SPADE_ACE_AGENT_URL`` with the served model name, points the user simulator (model
``--user-model``) at ``SPADE_ACE_USER_URL`` and adds the selected categories as
``spade_selected``; then it runs ACEBench's own ``generate.py``. ACEBench's in-process model
path (vllm, Gemini) is replaced by an empty stand-in: the model is always reached over HTTP.
"""

LAUNCHER = r"""
import os
import runpy
import sys
import types

sys.path.insert(0, os.getcwd())
# ACEBench's in-process path (vllm, Gemini) is never used here: the model is reached over
# HTTP. An empty stand-in keeps those heavy imports out.
_local = types.ModuleType("model_inference.common_inference")
_local.CommonInference = type("CommonInference", (), {})
sys.modules["model_inference.common_inference"] = _local
import category
import openai
from openai.resources.chat import completions as _chat
from model_inference import apimodel_inference as api
from model_inference.base_inference import BaseHandler
from model_inference.inference_map import inference_map

LABEL = os.environ["SPADE_ACE_LABEL"]
AGENT_URL = os.environ["SPADE_ACE_AGENT_URL"]
SERVED = os.environ["SPADE_ACE_SERVED_MODEL"]
category.ACE_DATA_CATEGORY["spade_selected"] = os.environ["SPADE_ACE_CATEGORIES"].split(",")
os.environ["QWEN_BASE_URL"], os.environ["QWEN_API_KEY"] = AGENT_URL, "EMPTY"
if os.environ.get("SPADE_ACE_USER_URL"):
    os.environ["GPT_BASE_URL"] = os.environ["SPADE_ACE_USER_URL"]
    os.environ["GPT_API_KEY"] = os.environ.get("SPADE_ACE_USER_KEY") or "EMPTY"


def handler_init(self, model_name, model_path=None, temperature=0.001, top_p=1,
                 max_tokens=1000, max_dialog_turns=40, user_model="gpt-4o", language="zh"):
    BaseHandler.__init__(self, model_name, model_path, temperature, top_p, max_tokens, language)
    self.client = openai.OpenAI(base_url=AGENT_URL, api_key="EMPTY")
    self.max_dialog_turns = max_dialog_turns
    self.user_model = user_model


api.APIModelInference.__init__ = handler_init
inference_map[LABEL] = api.APIModelInference
_create = _chat.Completions.create


def create(self, *args, **kwargs):
    if kwargs.get("model") == LABEL:
        kwargs["model"] = SERVED
    return _create(self, *args, **kwargs)


_chat.Completions.create = create
sys.argv = ["generate.py", *sys.argv[1:]]
runpy.run_path("generate.py", run_name="__main__")
"""
