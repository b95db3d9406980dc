# ruff: noqa: F821, E501
# ID: banking_top_spender
# TITLE: Largest spender in a category
# SPLIT: train
# HINT: List all accounts, fetch each one's transactions, and for each owner add only debits in the asked category; the answer is the owner with the largest such total.


class TopSpenderEnv(_ToolTask):
    domain = "banking"
    tools = [
        _tool("list_accounts", "[[account_id, owner]] for every account."),
        _tool("get_transactions", "[[kind, category, cents]] of an account.", ("account_id",), account_id=_STR),
    ]

    def setup(self, rng):
        owners = rng.sample(["hana", "igor", "jules", "kira", "lars", "mina", "omar"], 5)
        cats = ["travel", "dining", "groceries", "fuel"]
        self.category = rng.choice(cats)
        self.accounts = {f"A{rng.randint(100, 999)}{i}": o for i, o in enumerate(owners)}
        self.tx = {a: [[rng.choice(["debit", "debit", "credit"]), rng.choice(cats), rng.randint(500, 30000)]
                       for _ in range(rng.randint(4, 8))] for a in self.accounts}
        totals = {o: sum(c for k, cat, c in self.tx[a] if k == "debit" and cat == self.category)
                  for a, o in self.accounts.items()}
        best = max(totals.values())
        winner = max(totals, key=totals.get)
        if list(totals.values()).count(best) > 1 or best == 0:
            account = next(a for a, o in self.accounts.items() if o == winner)
            self.tx[account].append(["debit", self.category, 777])
        totals = {o: sum(c for k, cat, c in self.tx[a] if k == "debit" and cat == self.category)
                  for a, o in self.accounts.items()}
        self.answer = max(totals, key=totals.get)
        return f"Who spent the most on {self.category} (debits only)? Answer with the owner as \\boxed{{name}}."

    def tool_list_accounts(self):
        return sorted([a, o] for a, o in self.accounts.items())

    def tool_get_transactions(self, account_id):
        return self.tx[account_id]

    def check(self, answer):
        return answer.lower() == self.answer

    def plan(self):
        return [_act(_call("list_accounts")),
                _act(*[_call("get_transactions", account_id=a) for a in sorted(self.accounts)]),
                f"\\boxed{{{self.answer}}}"]
