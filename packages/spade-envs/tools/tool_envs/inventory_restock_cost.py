# ruff: noqa: F821, E501
# ID: inventory_restock_cost
# TITLE: Cost of restocking
# SPLIT: train
# HINT: List the SKUs, read each item's stock, reorder level and unit cost, and for every item strictly below its level add (level - stock) times the unit cost.


class RestockCostEnv(_ToolTask):
    domain = "inventory"
    tools = [
        _tool("list_skus", "All SKUs in the store."),
        _tool("get_item", "An item's stock, reorder_level and unit_cost.", ("sku",), sku=_STR),
    ]

    def setup(self, rng):
        self.items = {}
        for _ in range(rng.randint(6, 9)):
            level = rng.randint(10, 60)
            self.items[f"SKU-{rng.randint(1000, 9999)}"] = {
                "stock": rng.randint(0, 80), "reorder_level": level, "unit_cost": rng.randint(2, 40)}
        self.answer = sum((i["reorder_level"] - i["stock"]) * i["unit_cost"]
                          for i in self.items.values() if i["stock"] < i["reorder_level"])
        return ("Every item whose stock is below its reorder level must be restocked up to that level. "
                "What is the total cost in dollars? Answer as \\boxed{N}.")

    def tool_list_skus(self):
        return sorted(self.items)

    def tool_get_item(self, sku):
        return self.items[sku.upper()]

    def check(self, answer):
        return _number(answer) == self.answer

    def plan(self):
        return [_act(_call("list_skus")), _act(*[_call("get_item", sku=s) for s in sorted(self.items)]),
                f"\\boxed{{{self.answer}}}"]
