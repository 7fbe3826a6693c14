"""Forms of the Redis parts admin; values are checked here and again by the services."""

from django import forms

from ..exceptions import InvalidArgument, InvalidKeyPart
from ..keys import validate_key_part
from ..services import config
from ..services.autocomplete import validate_prefix

__all__ = [
    "AutocompleteForm",
    "ConfigForm",
    "MaintenanceForm",
]


def _key_part(value: str, kind: str) -> str:
    try:
        return validate_key_part(value, kind)
    except InvalidKeyPart as exc:
        raise forms.ValidationError(str(exc)) from exc


class ConfigForm(forms.Form):
    kind = forms.CharField(label="Type", max_length=200, help_text='e.g. "redis" or "logs"')
    name = forms.CharField(label="Component", max_length=200)
    value = forms.CharField(
        label="JSON",
        required=False,
        widget=forms.Textarea(attrs={"rows": 12, "cols": 80, "spellcheck": "false"}),
        help_text="A JSON object.",
    )
    delete = forms.BooleanField(required=False, label="Delete this configuration instead")

    def clean_kind(self) -> str:
        return _key_part(self.cleaned_data["kind"], "configuration type")

    def clean_name(self) -> str:
        return _key_part(self.cleaned_data["name"], "component name")

    def clean_value(self) -> dict | None:
        if self.data.get("delete"):
            return None
        try:
            return config.parse_config(self.cleaned_data["value"])
        except InvalidArgument as exc:
            raise forms.ValidationError(exc.reason[:1].upper() + exc.reason[1:] + ".") from exc


class MaintenanceForm(forms.Form):
    retry_after = forms.IntegerField(
        label="Retry after (seconds)", min_value=1, max_value=7 * 86400
    )
    message = forms.CharField(label="Message to visitors", max_length=500, required=False)


class AutocompleteForm(forms.Form):
    guild = forms.CharField(max_length=200)
    # The metaclass takes the field out of the class: Form.prefix (the HTML name prefix)
    # stays what Django sets; only the type checker sees the two names meet.
    prefix = forms.CharField(  # type: ignore[assignment]
        label="Type a name", max_length=200, required=False, strip=False
    )

    def clean_guild(self) -> str:
        return _key_part(self.cleaned_data["guild"], "guild")

    def clean_prefix(self) -> str:
        prefix = self.cleaned_data["prefix"]
        try:
            validate_prefix(prefix)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc
        return prefix
