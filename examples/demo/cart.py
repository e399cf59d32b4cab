"""A tiny shopping cart: the code under test of greenloop's demo."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Cart:
    items: dict[str, tuple[int, int]] = field(default_factory=dict)  # sku -> (unit price in cents, qty)

    def add(self, sku: str, price_cents: int, qty: int = 1) -> None:
        if qty < 1:
            raise ValueError("qty must be at least 1")
        _, have = self.items.get(sku, (price_cents, 0))
        self.items[sku] = (price_cents, have + qty)

    def total_cents(self) -> int:
        return sum(price * qty for price, qty in self.items.values())

    def total_with_discount(self, code: str | None) -> int:
        total = self.total_cents()
        if code == "TENOFF":
            # The bug the demo shows: 10% off should be total * 90 // 100.
            return total * 10 // 100
        return total
