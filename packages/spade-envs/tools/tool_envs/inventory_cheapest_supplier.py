# ruff: noqa: F821, E501
# ID: inventory_cheapest_supplier
# TITLE: Cheapest supplier for a quantity
# SPLIT: heldout
# HINT: Quotes depend on quantity through price breaks and a fixed shipping fee, so ask every supplier of the SKU for a quote at the exact quantity and compare totals, not unit prices.


class CheapestSupplierEnv(_ToolTask):
    domain = "inventory"
    tools = [
        _tool("list_suppliers", "Suppliers that sell a SKU.", ("sku",), sku=_STR),
        _tool("get_quote", "Total price (with shipping) of a quantity from a supplier.",
              ("supplier", "sku", "quantity"), supplier=_STR, sku=_STR, quantity=_INT),
    ]

    def setup(self, rng):
        self.sku = f"M{rng.randint(100, 999)}"
        self.qty = rng.randint(20, 400)
        names = rng.sample(["acme", "borealis", "cobalt", "dynamo", "everest", "fulcrum", "granite"], 5)
        self.terms = {n: (rng.uniform(2, 9), rng.randint(20, 200), rng.randint(10, 40)) for n in names}
        quotes = {n: self._quote(n) for n in names}
        self.answer = min(quotes, key=quotes.get)
        return (f"Which supplier offers the lowest total price for {self.qty} units of {self.sku}? "
                "Answer with the supplier name as \\boxed{name}.")

    def _quote(self, name):
        unit, breakpoint, percent = self.terms[name]
        unit = unit * (100 - percent) / 100 if self.qty >= breakpoint else unit
        return round(unit * self.qty + 35 + len(name) * 3, 2)

    def tool_list_suppliers(self, sku):
        return sorted(self.terms) if sku == self.sku else []

    def tool_get_quote(self, supplier, sku, quantity):
        if supplier not in self.terms or sku != self.sku or quantity != self.qty:
            raise ValueError("quotes exist only for listed suppliers, this SKU and the asked quantity")
        return self._quote(supplier)

    def check(self, answer):
        return answer.lower() == self.answer

    def plan(self):
        return [_act(_call("list_suppliers", sku=self.sku)),
                _act(*[_call("get_quote", supplier=n, sku=self.sku, quantity=self.qty) for n in sorted(self.terms)]),
                f"\\boxed{{{self.answer}}}"]
