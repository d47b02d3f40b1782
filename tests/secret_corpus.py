"""A planted-secret corpus, made fresh for each test with random suffixes.

Each kind is a credential in the context it turns up in within agent traces (a token in prose, a
header, a URL, an env line, a JSON key, JSON escaped inside a log line). ``secret`` is the part that
must never reach disk; expected values come from here, never from the redactor.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

__all__ = ["Planted", "corpus", "ENV_NAME"]

ENV_NAME = "CORPUS_SERVICE_TOKEN"  # an environment variable whose value is planted bare in text


@dataclass(frozen=True)
class Planted:
    kind: str
    secret: str
    text: str  # the secret in its context, one line or a few


def _r(n: int, alphabet: str = string.ascii_letters + string.digits, rng: random.Random | None = None) -> str:
    rng = rng or random.SystemRandom()
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def corpus(rng: random.Random | None = None) -> list[Planted]:
    """Every kind once; ``rng`` (default: the system's) makes the random parts."""
    rng = rng or random.SystemRandom()

    def r(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
        return _r(n, alphabet, rng)

    upper = string.ascii_uppercase + string.digits
    jwt = f"{_b64url({'alg': 'HS256', 'typ': 'JWT'})}.{_b64url({'sub': r(12)})}.{r(43, string.ascii_letters + '_-')}"
    pem_body = "\n".join(r(64, string.ascii_letters + string.digits + "+/") for _ in range(4))
    basic_pair = f"deploy:{r(18)}"
    env_value = r(32)
    k = [
        Planted("anthropic", s := f"sk-ant-api03-{r(90)}", f"The key is {s}, keep it safe."),
        Planted("openai", s := f"sk-proj-{r(120)}", f"OPENAI key: {s}"),
        Planted("aws_key_id", s := f"AKIA{r(16, upper)}", f"aws configure set aws_access_key_id {s}"),
        Planted("aws_secret", s := r(40, string.ascii_letters + string.digits + "/+"),
                f"AWS_SECRET_ACCESS_KEY={s}"),
        Planted("github", s := f"ghp_{r(36)}", f"git clone https://github.com/o/r (token {s})"),
        Planted("github_fine", s := f"github_pat_{r(22)}_{r(59)}", f"GH token: {s}"),
        Planted("gitlab", s := f"glpat-{r(20)}", f"gitlab token {s} for CI"),
        Planted("slack", s := f"xoxb-{r(12, string.digits)}-{r(13, string.digits)}-{r(24).lower()}",
                f"notify via slack {s}"),
        Planted("slack_webhook", s := r(24), f"POST https://hooks.slack.com/services/T{r(8, upper)}/B{r(8, upper)}/{s}"),
        Planted("stripe_live", s := f"sk_live_{r(99)}", f"charge with {s}"),
        Planted("stripe_test", s := f"rk_test_{r(24)}", f"stripe restricted {s}"),
        Planted("google", s := f"AIza{r(35, string.ascii_letters + string.digits + '_-')}", f"maps key {s}"),
        Planted("jwt", jwt, f"session jwt {jwt} expires soon"),
        Planted("pem", pem_body, f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----"),
        Planted("url_userinfo", s := r(20), f"DATABASE_URL is postgres://app:{s}@db.internal:5432/app"),
        Planted("query_param", s := r(28), f"GET https://api.example.test/v1/items?api_key={s}&page=2"),
        Planted("env_line", s := r(22), f"DB_PASSWORD={s}"),
        Planted("bearer", s := r(40), f"Authorization: Bearer {s}"),
        Planted("basic", s := base64.b64encode(basic_pair.encode()).decode(), f"Authorization: Basic {s}"),
        Planted("json_pass", s := r(16), json.dumps({"user": "ada", "pass": s})),
        Planted("json_camel", s := r(18), json.dumps({"host": "db", "dbPassword": s})),
        Planted("json_aws_camel", s := r(40), json.dumps({"accessKeyId": "x", "secretAccessKey": s})),
        Planted("json_auth_token", s := r(26), json.dumps({"authToken": s, "ttl": 3600})),
        Planted("escaped_json_log", s := r(30),
                "2024-01-01 INFO body=" + json.dumps(json.dumps({"client_secret": s, "grant": "x"}))),
        Planted("header_api_key", s := r(32), f"X-Api-Key: {s}"),
        Planted("cookie", s := r(30), f"Cookie: sessionid={s}; theme=dark"),
        Planted("kebab_key", s := r(24), json.dumps({"x-auth-token": s})),
        Planted("env_value", env_value, f"connected with {env_value} as the service"),
    ]
    return k


def env_for(planted: list[Planted]) -> dict[str, str]:
    """The environment variables the corpus expects (its ``env_value`` kind)."""
    return {ENV_NAME: next(p.secret for p in planted if p.kind == "env_value")}


def payload(planted: list[Planted], canary: str) -> str:
    """Every planted secret, one context per line, with a canary proving the text was stored."""
    return "\n".join([canary, *(p.text for p in planted)])
