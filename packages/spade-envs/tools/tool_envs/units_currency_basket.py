# ruff: noqa: F821, E501
# ID: units_currency_basket
# TITLE: A shopping basket in many currencies
# SPLIT: train
# HINT: Fetch the basket to see each item's price and currency, ask for the exchange rate of every currency that appears, convert each price times its quantity and add them.


class CurrencyBasketEnv(_ToolTask):
    domain = "units"
    tools = [
        _tool("get_basket", "[[item, quantity, unit_price, currency]] of the basket.", ("basket_id",), basket_id=_STR),
        _tool("rate_to_credits", "Credits per one unit of a currency.", ("currency",), currency=_STR),
    ]

    def setup(self, rng):
        self.rates = {c: round(rng.uniform(0.1, 5), 3) for c in ["ZRK", "PLV", "MUN", "TOR"]}
        self.bid = f"bk{rng.randint(100, 999)}"
        self.items = [[rng.choice(["tea", "soap", "rope", "salt", "ink"]), rng.randint(1, 6), round(rng.uniform(1, 40), 2),
                       rng.choice(sorted(self.rates))] for _ in range(rng.randint(3, 5))]
        self.answer = round(sum(q * p * self.rates[c] for _, q, p, c in self.items), 2)
        return f"What does basket {self.bid} cost in credits? Answer rounded to cents as \\boxed{{N.NN}}."

    def tool_get_basket(self, basket_id):
        if basket_id != self.bid:
            raise ValueError(f"no basket {basket_id!r}")
        return self.items

    def tool_rate_to_credits(self, currency):
        return self.rates[currency.upper()]

    def check(self, answer):
        value = _number(answer)
        return value is not None and abs(value - self.answer) <= 0.02

    def plan(self):
        used = sorted({c for *_, c in self.items})
        return [_act(_call("get_basket", basket_id=self.bid)),
                _act(*[_call("rate_to_credits", currency=c) for c in used]), f"\\boxed{{{self.answer:.2f}}}"]
