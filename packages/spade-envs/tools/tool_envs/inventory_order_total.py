# ruff: noqa: F821, E501
# ID: inventory_order_total
# TITLE: Pricing an order
# SPLIT: train
# HINT: Fetch the order to get its lines, then fetch each SKU's price and discount; a line costs quantity times price, reduced by the discount percent, and the order total is the sum rounded to cents.


class OrderTotalEnv(_ToolTask):
    domain = "inventory"
    tools = [
        _tool("get_order", "An order's lines: [[sku, quantity]].", ("order_id",), order_id=_STR),
        _tool("get_price", "A SKU's unit price and discount percent.", ("sku",), sku=_STR),
    ]

    def setup(self, rng):
        self.oid = f"ORD{rng.randint(10000, 99999)}"
        self.prices = {f"S{rng.randint(100, 999)}{i}": {"price": round(rng.uniform(1, 90), 2),
                                                       "discount": rng.choice([0, 0, 5, 10, 20])}
                       for i in range(6)}
        self.lines = [[s, rng.randint(1, 12)] for s in rng.sample(sorted(self.prices), rng.randint(3, 5))]
        total = sum(q * self.prices[s]["price"] * (100 - self.prices[s]["discount"]) / 100 for s, q in self.lines)
        self.answer = round(total, 2)
        return f"What is the total price of order {self.oid} after discounts? Answer as \\boxed{{N.NN}}."

    def tool_get_order(self, order_id):
        if order_id != self.oid:
            raise ValueError(f"no order {order_id!r}")
        return self.lines

    def tool_get_price(self, sku):
        return self.prices[sku]

    def check(self, answer):
        value = _number(answer)
        return value is not None and abs(value - self.answer) <= 0.011

    def plan(self):
        return [_act(_call("get_order", order_id=self.oid)),
                _act(*[_call("get_price", sku=s) for s, _ in self.lines]), f"\\boxed{{{self.answer:.2f}}}"]
