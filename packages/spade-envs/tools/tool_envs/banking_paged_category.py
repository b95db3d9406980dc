# ruff: noqa: F821, E501
# ID: banking_paged_category
# TITLE: Category total over paged statements
# SPLIT: heldout
# HINT: The statement comes in pages; keep requesting the next page until the tool reports no next page, and add the amounts of the asked merchant category across all pages.


class PagedCategoryEnv(_ToolTask):
    domain = "banking"
    tools = [
        _tool("get_statement_page", "One page of the statement: rows and next_page (or null).",
              ("page",), page=_INT),
    ]

    def setup(self, rng):
        cats = ["books", "music", "pharmacy", "transit", "hardware"]
        self.category = rng.choice(cats)
        rows = [[f"T{rng.randint(10000, 99999)}", rng.choice(cats), rng.randint(100, 9999)] for _ in range(rng.randint(14, 24))]
        self.pages = [rows[i:i + 5] for i in range(0, len(rows), 5)]
        self.answer = sum(c for _, cat, c in rows if cat == self.category)
        return (f"How many cents in total were spent in category '{self.category}' over the whole statement? "
                "Pages start at 1. Answer as \\boxed{N}.")

    def tool_get_statement_page(self, page):
        if not 1 <= page <= len(self.pages):
            raise ValueError(f"page {page} does not exist")
        return {"rows": self.pages[page - 1], "next_page": page + 1 if page < len(self.pages) else None}

    def check(self, answer):
        return _number(answer) == self.answer

    def plan(self):
        return [_act(_call("get_statement_page", page=p)) for p in range(1, len(self.pages) + 1)] + [
            f"\\boxed{{{self.answer}}}"]
