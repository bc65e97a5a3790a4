"""Google registries get `oauth2accesstoken` + an ADC access token; the rest nothing; failures one line."""

from __future__ import annotations

import google.auth
import pytest
from google.auth import exceptions as gexc

from vtrain.errors import PackagingError
from vtrain.trainer.image import auth


class _Credentials:
    token = None

    def __init__(self, fail: Exception | None = None) -> None:
        self.fail = fail

    def refresh(self, request: object) -> None:
        if self.fail is not None:
            raise self.fail
        self.token = "ya29.fresh"


@pytest.mark.parametrize(("host", "google"), [
    ("us-central1-docker.pkg.dev", True), ("europe-docker.pkg.dev", True), ("gcr.io", True), ("eu.gcr.io", True),
    ("127.0.0.1:5000", False), ("registry-1.docker.io", False), ("docker.pkg.dev.example.com", False),
])
def test_which_registries_are_googles(host: str, google: bool) -> None:
    assert auth.is_google_registry(host) is google


def test_a_google_registry_gets_an_access_token(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[object] = []
    monkeypatch.setattr(google.auth, "default", lambda scopes: asked.append(scopes) or (_Credentials(), "proj"))
    assert auth.default_credentials("us-docker.pkg.dev") == ("oauth2accesstoken", "ya29.fresh")
    assert asked == [[auth.SCOPE]]
    assert auth.default_credentials("127.0.0.1:5000") is None


@pytest.mark.parametrize(("fail", "message"), [
    (gexc.DefaultCredentialsError("none"), "no Google Cloud credentials to push to us-docker.pkg.dev: run `gcloud"),
    (gexc.RefreshError("invalid_grant: Token has been expired or revoked.\nmore"),
     "cannot get a Google access token to push to us-docker.pkg.dev: invalid_grant: Token has been expired"),
])
def test_credential_failures_are_one_line(monkeypatch: pytest.MonkeyPatch, fail: Exception, message: str) -> None:
    def default(scopes: object) -> object:
        if isinstance(fail, gexc.DefaultCredentialsError):
            raise fail
        return _Credentials(fail), "proj"

    monkeypatch.setattr(google.auth, "default", default)
    with pytest.raises(PackagingError) as err:
        auth.default_credentials("us-docker.pkg.dev")
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)
