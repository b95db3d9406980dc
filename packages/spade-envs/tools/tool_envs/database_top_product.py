# ruff: noqa: F821, E501
# ID: database_top_product
# TITLE: Best-selling product in a region
# SPLIT: heldout
# HINT: Select the sales rows of the region, sum quantities per product id, then look up the winning product id in the products table to get its name.


class TopProductEnv(_ToolTask):
    domain = "database"
    tools = [
        _tool("select", "Rows of a table where a column equals a value (as text).", ("table", "column", "value"),
              table={"type": "string", "enum": ["sales", "products"]}, column=_STR, value=_STR),
    ]

    def setup(self, rng):
        names = rng.sample(["kettle", "lantern", "mixer", "router", "scanner", "toaster", "webcam"], 5)
        self.products = [{"product_id": 40 + i, "name": n} for i, n in enumerate(names)]
        self.region = rng.choice(["north", "south", "east", "west"])
        self.sales = [{"region": rng.choice(["north", "south", "east", "west"]), "product_id": rng.choice(self.products)["product_id"],
                       "qty": rng.randint(1, 30)} for _ in range(30)]
        totals = {}
        for s in self.sales:
            if s["region"] == self.region:
                totals[s["product_id"]] = totals.get(s["product_id"], 0) + s["qty"]
        if not totals or list(totals.values()).count(max(totals.values())) > 1:
            self.sales.append({"region": self.region, "product_id": self.products[0]["product_id"], "qty": 31})
            totals[self.products[0]["product_id"]] = totals.get(self.products[0]["product_id"], 0) + 31
        self.best = max(totals, key=totals.get)
        self.answer = next(p["name"] for p in self.products if p["product_id"] == self.best)
        return f"Which product sold the most units in the {self.region} region? Answer with its name as \\boxed{{name}}."

    def tool_select(self, table, column, value):
        rows = self.sales if table == "sales" else self.products
        if column not in rows[0]:
            raise ValueError(f"no column {column!r}")
        return [r for r in rows if str(r[column]) == value]

    def check(self, answer):
        return answer.lower() == self.answer

    def plan(self):
        return [_act(_call("select", table="sales", column="region", value=self.region)),
                _act(_call("select", table="products", column="product_id", value=str(self.best))),
                f"\\boxed{{{self.answer}}}"]
