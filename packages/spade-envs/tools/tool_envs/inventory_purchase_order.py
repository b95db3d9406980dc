# ruff: noqa: F821, E501
# ID: inventory_purchase_order
# TITLE: Raise a purchase order
# SPLIT: train
# HINT: Read the item's stock, its open incoming quantity and its target level; order exactly target minus stock minus incoming with create_po, and answer with the id the tool returns.


class PurchaseOrderEnv(_ToolTask):
    domain = "inventory"
    tools = [
        _tool("get_item", "Stock and target level of a SKU.", ("sku",), sku=_STR),
        _tool("incoming", "Units already on order for a SKU.", ("sku",), sku=_STR),
        _tool("create_po", "Create a purchase order; returns its id.", ("sku", "quantity"), sku=_STR, quantity=_INT),
    ]

    def setup(self, rng):
        self.sku = f"K{rng.randint(1000, 9999)}"
        self.stock, self.target = rng.randint(0, 40), rng.randint(120, 300)
        self.on_order = rng.randint(0, 60)
        self.need = self.target - self.stock - self.on_order
        self.pos = {}
        self.next_id = rng.randint(500, 900)
        return (f"Raise one purchase order for {self.sku} that brings stock plus incoming units exactly to the "
                "target level. Answer with the purchase order id as \\boxed{PO-N}.")

    def tool_get_item(self, sku):
        if sku != self.sku:
            raise ValueError(f"no SKU {sku!r}")
        return {"stock": self.stock, "target_level": self.target}

    def tool_incoming(self, sku):
        return self.on_order if sku == self.sku else 0

    def tool_create_po(self, sku, quantity):
        if sku != self.sku or quantity <= 0:
            raise ValueError("unknown SKU or non-positive quantity")
        po = f"PO-{self.next_id + len(self.pos)}"
        self.pos[po] = quantity
        return po

    def check(self, answer):
        return len(self.pos) == 1 and self.pos.get(answer.upper()) == self.need

    def plan(self):
        return [_act(_call("get_item", sku=self.sku), _call("incoming", sku=self.sku)),
                _act(_call("create_po", sku=self.sku, quantity=self.need)), f"\\boxed{{PO-{self.next_id}}}"]
