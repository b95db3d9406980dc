# ruff: noqa: F821, E501
# ID: database_department_average
# TITLE: Average salary of a department
# SPLIT: train
# HINT: Department names map to ids in the departments table; fetch the department id, select the employees with that id, and average their salaries, rounding to the nearest whole number at the end.


class DepartmentAverageEnv(_ToolTask):
    domain = "database"
    tools = [
        _tool("query", "Rows of a table filtered by column=value (as text); omit both for all rows.",
              ("table",), table={"type": "string", "enum": ["departments", "employees"]}, column=_STR, value=_STR),
    ]

    def setup(self, rng):
        self.depts = [{"dept_id": d, "name": n} for d, n in zip(rng.sample(range(10, 99), 4), ["sales", "ops", "legal", "research"], strict=True)]
        self.target = rng.choice(self.depts)
        self.emps = [{"emp_id": 300 + i, "dept_id": rng.choice(self.depts)["dept_id"], "salary": rng.randrange(30000, 150000, 100)}
                     for i in range(rng.randint(15, 22))]
        self.emps.append({"emp_id": 299, "dept_id": self.target["dept_id"], "salary": rng.randrange(30000, 150000, 100)})
        sal = [e["salary"] for e in self.emps if e["dept_id"] == self.target["dept_id"]]
        self.answer = round(sum(sal) / len(sal))
        return f"What is the average salary in the {self.target['name']} department? Answer as \\boxed{{N}} (nearest integer)."

    def tool_query(self, table, column=None, value=None):
        rows = self.depts if table == "departments" else self.emps
        if column is None:
            return rows[:8] if table == "employees" else rows
        if column not in rows[0]:
            raise ValueError(f"no column {column!r}")
        return [r for r in rows if str(r[column]) == str(value)]

    def check(self, answer):
        value = _number(answer)
        return value is not None and abs(value - self.answer) <= 0.5

    def plan(self):
        return [_act(_call("query", table="departments", column="name", value=self.target["name"])),
                _act(_call("query", table="employees", column="dept_id", value=str(self.target["dept_id"]))),
                f"\\boxed{{{self.answer}}}"]
