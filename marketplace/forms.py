"""Forms of the demo site. Every field is checked here, before any service is called."""

import re

from django import forms
from django.contrib.auth import get_user_model

from redisparts_app.conf import app_settings
from redisparts_app.exceptions import InvalidKeyPart, InvalidPrice
from redisparts_app.keys import validate_key_part
from redisparts_app.services.market import validate_price

from .money import format_cents
from .refusals import refusal

PRICE_PATTERN = re.compile(r"([0-9]+)(?:\.[0-9]{1,2})?")
PRICE_REQUIRED = "Enter a price."


def parse_price(text: str) -> int:
    """Turn what a person types ("12", "12.5", "12.50") into cents; ValidationError if not."""
    text = text.strip()
    if not text:
        raise forms.ValidationError(PRICE_REQUIRED)
    if text.startswith("-"):
        raise forms.ValidationError("The price must be more than zero.")
    number = PRICE_PATTERN.fullmatch(text)
    if number is None:
        raise forms.ValidationError("Enter a price as a number, like 12 or 12.50.")
    limit = app_settings.MARKET_MAX_PRICE
    too_high = forms.ValidationError(f"The price can be at most {format_cents(limit)}.")
    # Counted before int(): a number of any length says the limit, not a parse error.
    if len(number[1].lstrip("0")) > len(str(limit // 100)):
        raise too_high
    whole, _, fraction = text.partition(".")
    cents = int(whole) * 100 + int(fraction.ljust(2, "0") or 0)
    if cents == 0:
        raise forms.ValidationError("The price must be more than zero.")
    if cents > limit:
        raise too_high
    return validate_price(cents)


def key_part(value: str, kind: str) -> str:
    """A name that Redis keys may hold (no ``: { } *``, control characters...)."""
    try:
        return validate_key_part(value, kind)
    except InvalidKeyPart as exc:
        raise forms.ValidationError(refusal(exc)) from exc


class ListItemForm(forms.Form):
    """Put an item of your inventory on the market."""

    item = forms.ChoiceField(label="Item")
    # No max_length: parse_price says the limit whatever the length typed.
    price = forms.CharField(
        label="Price",
        strip=True,
        error_messages={"required": PRICE_REQUIRED},
        widget=forms.TextInput(attrs={"inputmode": "decimal", "placeholder": "12.50"}),
    )

    def __init__(self, *args, inventory: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["item"].choices = [(item, item) for item in inventory]
        self.fields["item"].error_messages["invalid_choice"] = (
            "That item is not in your inventory (sold or already listed?)."
        )

    def clean_price(self) -> int:
        return parse_price(self.cleaned_data["price"])


class BuyForm(forms.Form):
    """Buy a listing at the price the buyer saw (cents)."""

    seller = forms.CharField(max_length=200, strip=False)
    item = forms.CharField(max_length=200, strip=False)
    price = forms.CharField(max_length=20, strip=False)

    def clean_seller(self) -> str:
        return key_part(self.cleaned_data["seller"], "seller")

    def clean_item(self) -> str:
        return key_part(self.cleaned_data["item"], "item")

    def clean_price(self) -> int:
        try:
            return validate_price(self.cleaned_data["price"])
        except InvalidPrice as exc:
            raise forms.ValidationError(refusal(exc)) from exc


class CancelForm(forms.Form):
    """Withdraw one of your own listings."""

    item = forms.CharField(max_length=200, strip=False)

    def clean_item(self) -> str:
        return key_part(self.cleaned_data["item"], "item")


class FriendForm(forms.Form):
    """Name another user of the site."""

    username = forms.CharField(label="Username", max_length=150, strip=True)

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_username(self) -> str:
        name = key_part(self.cleaned_data["username"], "username")
        if name == self.user.get_username():
            raise forms.ValidationError("You cannot be your own friend.")
        if not get_user_model().objects.filter(username=name).exists():
            raise forms.ValidationError(f"There is no user called {name!r}.")
        return name


def error_text(form: forms.Form) -> str:
    """All of a form's errors as sentences for a 400 page (the fields' own sentences)."""
    return " ".join(str(error) for errors in form.errors.values() for error in errors)
