# ruff: noqa: F821, E501
# ID: inventory_most_stock
# TITLE: Which warehouse holds the most
# SPLIT: train
# HINT: Look up the product's SKU from its name first, then query that SKU's stock in every warehouse and compare; subtract reserved units from on-hand units before comparing.


class MostStockEnv(_ToolTask):
    domain = "inventory"
    tools = [
        _tool("find_product", "The SKU of a product name.", ("name",), name=_STR),
        _tool("list_warehouses", "Warehouse codes."),
        _tool("get_stock", "On-hand and reserved units of a SKU in a warehouse.", ("warehouse", "sku"),
              warehouse=_STR, sku=_STR),
    ]

    def setup(self, rng):
        self.name = rng.choice(["steel bolt", "oak plank", "copper wire", "glass jar", "rubber seal"])
        self.sku = f"P{rng.randint(100, 999)}"
        self.houses = rng.sample(["WH-N", "WH-S", "WH-E", "WH-W", "WH-C", "WH-X"], 4)
        self.stock = {}
        for h in self.houses:
            on = rng.randint(20, 300)
            self.stock[h] = {"on_hand": on, "reserved": rng.randint(0, on)}
        free = {h: s["on_hand"] - s["reserved"] for h, s in self.stock.items()}
        best = max(free.values())
        if list(free.values()).count(best) > 1:
            top = max(free, key=free.get)
            self.stock[top]["on_hand"] += 1
        self.answer = max(self.houses, key=lambda h: self.stock[h]["on_hand"] - self.stock[h]["reserved"])
        return (f"Which warehouse has the most available (on hand minus reserved) units of '{self.name}'? "
                "Answer with its code, as \\boxed{CODE}.")

    def tool_find_product(self, name):
        if name.lower().strip() != self.name:
            raise ValueError(f"no product named {name!r}")
        return self.sku

    def tool_list_warehouses(self):
        return self.houses

    def tool_get_stock(self, warehouse, sku):
        if warehouse not in self.stock:
            raise ValueError(f"no warehouse {warehouse!r}")
        return self.stock[warehouse] if sku == self.sku else {"on_hand": 0, "reserved": 0}

    def check(self, answer):
        return answer.upper() == self.answer

    def plan(self):
        return [_act(_call("find_product", name=self.name), _call("list_warehouses")),
                _act(*[_call("get_stock", warehouse=h, sku=self.sku) for h in self.houses]),
                f"\\boxed{{{self.answer}}}"]
