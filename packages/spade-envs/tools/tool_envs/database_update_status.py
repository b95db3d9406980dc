# ruff: noqa: F821, E501
# ID: database_update_status
# TITLE: Cancel a customer's open orders
# SPLIT: train
# HINT: Resolve the customer's id from their email, select their orders, and update only those whose status is open to cancelled; shipped orders must stay as they are.


class UpdateStatusEnv(_ToolTask):
    domain = "database"
    tools = [
        _tool("select", "Rows of a table where a column equals a value (as text).", ("table", "column", "value"),
              table={"type": "string", "enum": ["customers", "orders"]}, column=_STR, value=_STR),
        _tool("update", "Set one column of one order by order_id.", ("order_id", "column", "value"),
              order_id=_INT, column=_STR, value=_STR),
    ]

    def setup(self, rng):
        self.customers = [{"id": 200 + i, "email": f"{n}@shop.test"} for i, n in enumerate(rng.sample(["ana", "bo", "cy", "dan", "eli"], 5))]
        self.target = rng.choice(self.customers)
        self.orders = [{"order_id": 7000 + i, "customer_id": rng.choice(self.customers)["id"],
                        "status": rng.choice(["open", "shipped"])} for i in range(14)]
        self.orders.append({"order_id": 6999, "customer_id": self.target["id"], "status": "open"})
        self.want = {o["order_id"]: ("cancelled" if o["customer_id"] == self.target["id"] and o["status"] == "open" else o["status"])
                     for o in self.orders}
        return (f"Cancel every open order of the customer with email {self.target['email']} (set status to "
                "'cancelled'); leave all other orders unchanged. When finished, put the word done inside \\boxed{}.")

    def tool_select(self, table, column, value):
        rows = self.customers if table == "customers" else self.orders
        if column not in rows[0]:
            raise ValueError(f"no column {column!r}")
        return [dict(r) for r in rows if str(r[column]) == value]

    def tool_update(self, order_id, column, value):
        row = next((o for o in self.orders if o["order_id"] == order_id), None)
        if row is None or column not in ("status",):
            raise ValueError("no such order, or the column cannot be updated")
        row[column] = value
        return "1 row updated"

    def check(self, answer):
        return answer.lower() == "done" and all(self.want[o["order_id"]] == o["status"] for o in self.orders)

    def plan(self):
        ids = [o for o, s in self.want.items() if s == "cancelled"]
        return [_act(_call("select", table="customers", column="email", value=self.target["email"])),
                _act(_call("select", table="orders", column="customer_id", value=str(self.target["id"]))),
                _act(*[_call("update", order_id=i, column="status", value="cancelled") for i in ids]), "\\boxed{done}"]
