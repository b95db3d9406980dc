# ruff: noqa: F821, E501
# ID: banking_target_transfer
# TITLE: Transfer to reach a target balance
# SPLIT: train
# HINT: Read both balances before moving money; transfer exactly the gap between the target and the current balance, remembering that a fee is charged to the sender, then answer done.


class TargetTransferEnv(_ToolTask):
    domain = "banking"
    tools = [
        _tool("get_balance", "Balance of an account in cents.", ("account_id",), account_id=_STR),
        _tool("transfer_fee", "The fee in cents charged to the sender of a transfer."),
        _tool("transfer", "Move cents from one account to another (the sender also pays the fee).",
              ("from_account", "to_account", "cents"), from_account=_STR, to_account=_STR, cents=_INT),
    ]

    def setup(self, rng):
        self.src, self.dst = f"S{rng.randint(1000, 9999)}", f"D{rng.randint(1000, 9999)}"
        self.fee = rng.randint(10, 99)
        self.bal = {self.src: rng.randint(200000, 500000), self.dst: rng.randint(0, 100000)}
        self.target = self.bal[self.dst] + rng.randint(5000, 100000)
        self.start_src = self.bal[self.src]
        return (f"Move money from {self.src} to {self.dst} so that {self.dst} holds exactly the balance "
                f"written on its note (call get_balance on {self.dst} to see it). When finished, put the word done inside \\boxed{{}}.")

    def tool_get_balance(self, account_id):
        if account_id not in self.bal:
            raise ValueError(f"no account {account_id!r}")
        if account_id == self.dst:
            return {"balance": self.bal[account_id], "note": f"target balance {self.target}"}
        return {"balance": self.bal[account_id]}

    def tool_transfer_fee(self):
        return self.fee

    def tool_transfer(self, from_account, to_account, cents):
        if from_account not in self.bal or to_account not in self.bal or cents <= 0:
            raise ValueError("unknown account or non-positive amount")
        if self.bal[from_account] < cents + self.fee:
            raise ValueError("insufficient funds")
        self.bal[from_account] -= cents + self.fee
        self.bal[to_account] += cents
        return "ok"

    def check(self, answer):
        return answer.lower() == "done" and self.bal[self.dst] == self.target

    def plan(self):
        gap = self.target - self.bal[self.dst]
        return [_act(_call("get_balance", account_id=self.dst)),
                _act(_call("transfer", from_account=self.src, to_account=self.dst, cents=gap)), "\\boxed{done}"]
