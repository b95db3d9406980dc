# ruff: noqa: F821, E501
# ID: banking_fx_total
# TITLE: Net worth across currencies
# SPLIT: train
# HINT: Each account is held in its own currency; read every balance with its currency, fetch the rate of each currency to the home currency, convert and add, rounding only at the end.


class FxTotalEnv(_ToolTask):
    domain = "banking"
    tools = [
        _tool("list_accounts", "The customer's account ids."),
        _tool("get_account", "Balance and currency of an account.", ("account_id",), account_id=_STR),
        _tool("get_rate", "How many units of the home currency one unit of a currency buys.",
              ("currency",), currency=_STR),
    ]

    def setup(self, rng):
        self.curr = {c: round(rng.uniform(0.05, 3.0), 4) for c in rng.sample(["ZAL", "QUR", "VEX", "MOR", "TAN"], 3)}
        self.accounts = {f"X{rng.randint(100, 999)}{i}": [round(rng.uniform(100, 20000), 2), rng.choice(sorted(self.curr))]
                         for i in range(rng.randint(3, 5))}
        self.answer = round(sum(b * self.curr[c] for b, c in self.accounts.values()), 2)
        return ("What is the customer's total balance in the home currency (HOM)? "
                "Answer rounded to cents as \\boxed{N.NN}.")

    def tool_list_accounts(self):
        return sorted(self.accounts)

    def tool_get_account(self, account_id):
        balance, currency = self.accounts[account_id]
        return {"balance": balance, "currency": currency}

    def tool_get_rate(self, currency):
        return self.curr[currency.upper()]

    def check(self, answer):
        value = _number(answer)
        return value is not None and abs(value - self.answer) <= 0.02

    def plan(self):
        return [_act(_call("list_accounts")),
                _act(*[_call("get_account", account_id=a) for a in sorted(self.accounts)]),
                _act(*[_call("get_rate", currency=c) for c in sorted(self.curr)]), f"\\boxed{{{self.answer:.2f}}}"]
