import pytest

from cart import Cart


def test_empty_cart_costs_nothing():
    assert Cart().total_cents() == 0


def test_adding_the_same_item_twice_adds_up_quantities():
    cart = Cart()
    cart.add("apple", 50)
    cart.add("apple", 50, qty=2)
    assert cart.items["apple"] == (50, 3)


def test_total_sums_price_times_quantity():
    cart = Cart()
    cart.add("apple", 50, qty=3)
    cart.add("pear", 120)
    assert cart.total_cents() == 270


def test_discount_code_takes_ten_percent_off():
    cart = Cart()
    cart.add("book", 2000)
    assert cart.total_with_discount("TENOFF") == 1800


def test_quantity_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        Cart().add("apple", 50, qty=0)
