# ruff: noqa: F821, E501
# ID: database_customer_spend
# TITLE: A customer's order total
# SPLIT: train
# HINT: Look the customer up in the customers table to get their id, then query the orders table by customer_id and add the amounts of orders that are not refunded.


class CustomerSpendEnv(_ToolTask):
    domain = "database"
    tools = [
        _tool("list_tables", "Table names and their columns."),
        _tool("select", "Rows of a table where a column equals a value (values compared as text).",
              ("table", "column", "value"), table=_STR, column=_STR, value=_STR),
    ]

    def setup(self, rng):
        names = rng.sample(["Ada Park", "Bo Lind", "Cy Moro", "Di Voss", "Ed Quinn", "Flo Hart"], 5)
        self.customers = [{"id": rng.randint(100, 999) * 10 + i, "name": n} for i, n in enumerate(names)]
        self.target = rng.choice(self.customers)
        self.orders = [{"order_id": 5000 + i, "customer_id": rng.choice(self.customers)["id"],
                        "amount": rng.randint(5, 500), "status": rng.choice(["paid", "paid", "refunded"])}
                       for i in range(rng.randint(12, 20))]
        self.orders.append({"order_id": 4999, "customer_id": self.target["id"], "amount": rng.randint(5, 500), "status": "paid"})
        self.answer = sum(o["amount"] for o in self.orders if o["customer_id"] == self.target["id"] and o["status"] == "paid")
        return f"What is the total amount of {self.target['name']}'s paid (not refunded) orders? Answer as \\boxed{{N}}."

    def _tables(self):
        return {"customers": self.customers, "orders": self.orders}

    def tool_list_tables(self):
        return {t: sorted(rows[0]) for t, rows in self._tables().items()}

    def tool_select(self, table, column, value):
        rows = self._tables()[table]
        if column not in rows[0]:
            raise ValueError(f"no column {column!r} in {table}")
        return [r for r in rows if str(r[column]) == value][:30]

    def check(self, answer):
        return _number(answer) == self.answer

    def plan(self):
        return [_act(_call("select", table="customers", column="name", value=self.target["name"])),
                _act(_call("select", table="orders", column="customer_id", value=str(self.target["id"]))),
                f"\\boxed{{{self.answer}}}"]
