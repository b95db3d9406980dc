# ruff: noqa: F821, E501
# ID: banking_pending_balance
# TITLE: Balance after pending transactions
# SPLIT: train
# HINT: Find the customer's account id first, then read the posted balance and the list of pending transactions; credits add and debits subtract, and declined ones are ignored.


class PendingBalanceEnv(_ToolTask):
    domain = "banking"
    tools = [
        _tool("find_account", "Account id of a customer.", ("owner",), owner=_STR),
        _tool("get_balance", "Posted balance in cents of an account.", ("account_id",), account_id=_STR),
        _tool("list_pending", "Pending transactions: [[kind, cents, status]].", ("account_id",), account_id=_STR),
    ]

    def setup(self, rng):
        self.owner = rng.choice(["alva", "bruno", "celia", "dmitri", "esra"])
        self.acct = f"AC{rng.randint(100000, 999999)}"
        self.balance = rng.randint(10000, 900000)
        self.pending = [[rng.choice(["debit", "credit"]), rng.randint(100, 90000),
                         rng.choice(["pending", "pending", "declined"])] for _ in range(rng.randint(3, 7))]
        self.answer = self.balance + sum((c if k == "credit" else -c) for k, c, s in self.pending if s == "pending")
        return (f"What will {self.owner}'s balance be, in cents, once all pending transactions post? "
                "Answer as \\boxed{N}.")

    def tool_find_account(self, owner):
        if owner.lower() != self.owner:
            raise ValueError(f"no customer {owner!r}")
        return self.acct

    def _check_id(self, account_id):
        if account_id != self.acct:
            raise ValueError(f"no account {account_id!r}")

    def tool_get_balance(self, account_id):
        self._check_id(account_id)
        return self.balance

    def tool_list_pending(self, account_id):
        self._check_id(account_id)
        return self.pending

    def check(self, answer):
        return _number(answer) == self.answer

    def plan(self):
        return [_act(_call("find_account", owner=self.owner)),
                _act(_call("get_balance", account_id=self.acct), _call("list_pending", account_id=self.acct)),
                f"\\boxed{{{self.answer}}}"]
