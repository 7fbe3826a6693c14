"""Forms of the social pages; each field is checked with the services' own validators,
so a form that is valid never makes a service call fail on input."""

import re

from django import forms
from django.contrib.auth import get_user_model

from redisparts_app.conf import app_settings
from redisparts_app.keys import validate_key_part
from redisparts_app.services.mail import validate_text

from ..refusals import refusal
from .guilds import share_a_guild

# Longest mail body accepted by the site (the service allows MAIL_MAX_BODY_LENGTH).
MAIL_BODY_MAX = 5000
CHAT_MEMBERS_MAX = 20
_SEPARATORS = re.compile(r"[,\s]+")


def _checked(check, *args, **kwargs):
    """Run a service validator and turn its ValueError into a ValidationError that
    says what was wrong in a sentence (``refusal``)."""
    try:
        return check(*args, **kwargs)
    except (ValueError, TypeError) as exc:
        raise forms.ValidationError(refusal(exc)) from None


def existing_user(value: str, kind: str = "user") -> str:
    """The user name ``value`` if such a user exists, else a ValidationError."""
    name = _checked(validate_key_part, value, kind)
    if not get_user_model().objects.filter(username=name).exists():
        raise forms.ValidationError(f"There is no user named {name}.")
    return name


class NameField(forms.CharField):
    """A user, guild or chat name: a valid key part of at most MAX_KEY_PART_LENGTH."""

    def __init__(self, kind: str, **kwargs) -> None:
        self.kind = kind
        kwargs.setdefault("max_length", app_settings.MAX_KEY_PART_LENGTH)
        super().__init__(**kwargs)

    def clean(self, value):
        value = super().clean(value)
        return _checked(validate_key_part, value, self.kind)


class TextField(forms.CharField):
    """Message text: the mail/chat text rules (no control characters but line breaks)."""

    def __init__(self, field: str, *, multiline: bool = True, **kwargs) -> None:
        self.field, self.multiline = field, multiline
        kwargs.setdefault("strip", False)
        super().__init__(**kwargs)

    def clean(self, value):
        value = super().clean(value)
        return _checked(validate_text, value, self.field, self.max_length, multiline=self.multiline)


class GuildForm(forms.Form):
    guild = NameField("guild", label="Guild name")


class ComposeForm(forms.Form):
    """Guild mail to one member of a guild the sender shares."""

    to = NameField("recipient", label="To")
    subject = TextField("subject", multiline=False, max_length=app_settings.MAIL_MAX_SUBJECT_LENGTH)
    body = TextField(
        "body",
        max_length=min(MAIL_BODY_MAX, app_settings.MAIL_MAX_BODY_LENGTH),
        widget=forms.Textarea(attrs={"rows": 8}),
    )

    def __init__(self, *args, sender: str, **kwargs) -> None:
        self.sender = sender
        super().__init__(*args, **kwargs)

    def clean_to(self) -> str:
        to = existing_user(self.cleaned_data["to"], "recipient")
        if to == self.sender:
            raise forms.ValidationError("You cannot write to yourself.")
        if not share_a_guild(self.sender, to):
            raise forms.ValidationError(f"{to} is not in any guild of yours.")
        return to


def _member_names(value: str, sender: str) -> list[str]:
    names = [name for name in _SEPARATORS.split(value) if name]
    if not names:
        raise forms.ValidationError("Name at least one member.")
    if len(names) > CHAT_MEMBERS_MAX:
        raise forms.ValidationError(f"A chat can have at most {CHAT_MEMBERS_MAX} members.")
    members: dict[str, None] = {}
    for name in names:
        member = existing_user(name, "member")
        if member != sender:
            members.setdefault(member, None)
    if not members:
        raise forms.ValidationError("Name someone other than yourself.")
    return list(members)


class ChatCreateForm(forms.Form):
    members = forms.CharField(
        label="Members",
        max_length=CHAT_MEMBERS_MAX * (app_settings.MAX_KEY_PART_LENGTH + 2),
        help_text="User names separated by commas.",
    )
    message = TextField(
        "message",
        max_length=app_settings.CHAT_MAX_MESSAGE_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3}),
    )

    def __init__(self, *args, sender: str, **kwargs) -> None:
        self.sender = sender
        super().__init__(*args, **kwargs)

    def clean_members(self) -> list[str]:
        return _member_names(self.cleaned_data["members"], self.sender)


class ChatMessageForm(forms.Form):
    text = TextField(
        "message",
        max_length=app_settings.CHAT_MAX_MESSAGE_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
    )


class AddMemberForm(forms.Form):
    member = NameField("member", label="Add a member")

    def clean_member(self) -> str:
        return existing_user(self.cleaned_data["member"], "member")
