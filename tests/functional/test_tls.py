"""TLS through both modules: verify-full, refusals, client certificates, secrets kept out of every output.

Each PostgreSQL major gets one more server for the session, started with
``ssl=on`` and certificates made here (awa_testbed.tls). Its pg_hba.conf
(awa_testbed.pgserver.PG_HBA_TLS) refuses every role but the test bed's own
superuser without TLS, so a connection the modules make to it is a TLS one.
The server certificate names ``localhost`` only.
"""

from __future__ import annotations

import json
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from psycopg import sql

from awa_testbed.awadb import AwaDatabase, AwaDatabaseFactory, DbRole
from awa_testbed.pgserver import CERT_LOGIN_GROUP, PgServer
from awa_testbed.tls import CertificateAuthority, KeyPair, ServerTls

from ansible_collections.awa.operations.plugins.module_utils.errors import ConnectionFailed

from enqueue_shards_support import ansible_command, change, info, ledger_rows, refused, shard_counts

SECRET_MARKER = "must-never-show"


@dataclass(frozen=True)
class Certificates:
    ca: CertificateAuthority
    impostor: CertificateAuthority


@pytest.fixture(scope="session")
def certificates(tmp_path_factory) -> Certificates:
    folder = tmp_path_factory.mktemp("tls")
    return Certificates(CertificateAuthority("awa-test-ca", folder), CertificateAuthority("impostor-ca", folder))


@pytest.fixture(scope="session")
def tls_factories(certificates):
    """One TLS server (and template factory) per PostgreSQL major, started on first use."""
    server_pair = certificates.ca.issue("localhost", file_stem="server", dns_names=("localhost",))
    started: dict[int, AwaDatabaseFactory] = {}

    def factory(major: int) -> AwaDatabaseFactory:
        if major not in started:
            server = PgServer(major, tls=ServerTls(server_pair.cert, server_pair.key, certificates.ca.cert))
            server.start()
            started[major] = AwaDatabaseFactory(server)
        return started[major]

    yield factory
    for each in started.values():
        each.server.destroy()


@pytest.fixture
def tls_db(tls_factories, pg_major):
    """A fresh Awa database on the TLS server, with Awa's least-privilege roles (the migrator has a password)."""
    database = tls_factories(pg_major).create()
    database.setup_least_privilege(runtime_count=1)
    yield database
    database.drop()


def verify_full(db: AwaDatabase, certificates: Certificates) -> dict:
    """Connection options: the migrator with its password, TLS with verify-full against the test CA."""
    return {**db.login_args("migrator"), "login_host": "localhost", "ssl_mode": "verify-full",
            "ca_cert": str(certificates.ca.cert)}


def certificate_login(db: AwaDatabase, certificates: Certificates, key_folder: Path) -> dict:
    """Connection options of a new role that logs in with a client certificate (CN = its name, the key
    in ``key_folder``); the role is a member of the lanes' owner role."""
    role = DbRole(f"{db.name}_certop", None)
    db.query(sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}, {}").format(
        sql.Identifier(role.name), sql.Identifier(CERT_LOGIN_GROUP), sql.Identifier(db.roles["owner"].name)))
    db.query(sql.SQL("GRANT CONNECT, TEMP ON DATABASE {} TO {}").format(
        sql.Identifier(db.name), sql.Identifier(role.name)))
    db.roles["certop"] = role
    return client_certificate_options(db, certificates.ca.issue(role.name, client=True), key_folder) | {
        "login_user": role.name, "ca_cert": str(certificates.ca.cert), "session_role": db.roles["owner"].name}


def client_certificate_options(db: AwaDatabase, pair: KeyPair, key_folder: Path) -> dict:
    """verify-full options with ``pair`` as the client certificate, its key moved into ``key_folder``."""
    key_folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = pair.key.rename(key_folder / pair.key.name)
    return {"login_host": "localhost", "login_port": db.server.port, "login_db": db.name, "ssl_mode": "verify-full",
            "ssl_cert": str(pair.cert), "ssl_key": str(key)}


def test_verify_full_with_the_right_ca_connects_through_both_modules(tls_db, certificates):
    login = verify_full(tls_db, certificates)
    without_tls = refused(tls_db, "tls_q", 4, login={**login, "ssl_mode": "disable"})
    assert "no encryption" in without_tls.message, "the server must refuse plain TCP, or this test proves nothing"

    changed = change(tls_db, "tls_q", 4, login=login)
    assert (changed["changed"], changed["lanes_created"]) == (True, 16)
    assert shard_counts(tls_db) == {"tls_q": 4}
    assert ledger_rows(tls_db)[-1]["login_user"] == tls_db.roles["migrator"].name
    state = info(tls_db, login=login, queue="tls_q")["queues"]["tls_q"]
    assert (state["enqueue_shards"], state["lanes_missing"]) == ({"tls_q": 4}, [])


@pytest.mark.parametrize("mistake, expected", [
    ("wrong CA", ["SSL error: certificate verify failed", "set ca_cert to the CA that issued it"]),
    ("host name", ['server certificate for "localhost"', 'does not match host name "127.0.0.1"',
                   "Set login_host to a host name the server's certificate lists"]),
])
def test_a_wrong_ca_or_host_name_is_refused_clearly_and_nothing_is_written(tls_db, certificates, mistake, expected):
    login = verify_full(tls_db, certificates)
    wrong = {"wrong CA": {**login, "ca_cert": str(certificates.impostor.cert)},
             "host name": {**login, "login_host": "127.0.0.1"}}[mistake]

    refusal = refused(tls_db, "tls_q", 4, login=wrong)
    assert isinstance(refusal, ConnectionFailed)
    assert all(words in refusal.message for words in expected), refusal.message
    with pytest.raises(ConnectionFailed) as info_refusal:
        info(tls_db, login=wrong, queue="tls_q")
    assert all(words in info_refusal.value.message for words in expected), info_refusal.value.message
    assert shard_counts(tls_db) == {} and ledger_rows(tls_db) == []


def test_a_server_name_mismatch_is_all_that_verify_ca_forgives(tls_db, certificates):
    """The refusal above is the host-name check: verify-ca, which checks only the CA, accepts the address."""
    login = {**verify_full(tls_db, certificates), "login_host": "127.0.0.1", "ssl_mode": "verify-ca"}
    assert change(tls_db, "tls_q", 2, login=login)["changed"] is True
    refusal = refused(tls_db, "tls_q", 4, login={**login, "ca_cert": str(certificates.impostor.cert)})
    assert "certificate verify failed" in refusal.message


def test_client_certificate_authentication(tls_db, certificates, tmp_path):
    login = certificate_login(tls_db, certificates, tmp_path)

    changed = change(tls_db, "cert_q", 4, login=login)
    assert changed["changed"] and shard_counts(tls_db) == {"cert_q": 4}
    assert ledger_rows(tls_db)[-1]["login_user"] == login["login_user"]
    assert info(tls_db, login=login, queue="cert_q")["queues"]["cert_q"]["enqueue_shards"] == {"cert_q": 4}

    without_certificate = {key: value for key, value in login.items() if key not in ("ssl_cert", "ssl_key")}
    refusal = refused(tls_db, "cert_q", 2, login=without_certificate)
    assert "connection requires a valid client certificate" in refusal.message
    assert "set ssl_cert and ssl_key" in refusal.message

    someone_else = client_certificate_options(tls_db, certificates.ca.issue("someone_else", client=True), tmp_path)
    refusal = refused(tls_db, "cert_q", 2, login={**login, **someone_else})
    assert "certificate authentication failed for user" in refusal.message
    assert "common name (CN) must be login_user" in refusal.message

    forged = certificates.impostor.issue(login["login_user"], file_stem="forged", client=True)
    refused(tls_db, "cert_q", 2, login={**login, **client_certificate_options(tls_db, forged, tmp_path)})
    assert shard_counts(tls_db) == {"cert_q": 4}


PLAYBOOK = Path(__file__).parent / "playbooks" / "tls_runs.yml"


def test_the_key_path_and_the_password_appear_nowhere(tls_db, certificates, tmp_path):
    """Successes and failures, through Ansible at -vvv (with its log) and the Python entry points."""
    key_folder = tmp_path / f"keys-{SECRET_MARKER}"
    cert_login = certificate_login(tls_db, certificates, key_folder)
    missing_key = {**cert_login, "ssl_key": str(key_folder / "absent.key")}
    password = f"pw-{SECRET_MARKER}-{secrets.token_urlsafe(8)}"
    migrator = tls_db.roles["migrator"].name
    tls_db.query(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(migrator), sql.Literal(password)))
    password_login = {**verify_full(tls_db, certificates), "login_password": password,
                      "session_role": tls_db.roles["owner"].name}
    impostor_ca = {**password_login, "ca_cert": str(certificates.impostor.cert)}
    assert SECRET_MARKER in cert_login["ssl_key"] and SECRET_MARKER not in cert_login["ssl_cert"]

    extra_vars = tmp_path / "vars.json"
    extra_vars.write_text(json.dumps({"certificate_login": cert_login, "password_login": password_login,
                                      "absent_key": missing_key["ssl_key"], "impostor_ca": impostor_ca["ca_cert"]}),
                          encoding="utf-8")
    log_file = tmp_path / "ansible.log"
    process = ansible_command("ansible-playbook", str(PLAYBOOK), "-e", f"@{extra_vars}", "-vvv", "--diff",
                              env_extra={"ANSIBLE_LOG_PATH": str(log_file),
                                         "ANSIBLE_PYTHON_INTERPRETER": sys.executable})
    output = process.stdout + process.stderr
    assert "ok=6 changed=2 unreachable=0 failed=0 skipped=0 rescued=0 ignored=3" in " ".join(output.split()), output
    assert '"converged": true' in output
    assert 'certificate present, but not private key file "(ssl_key)". Set ssl_key to' in output
    assert "certificate verify failed" in output
    # ansible-core 2.19 shows each module's invocation at -vvv, no_log values masked; 2.21 shows none.
    if '"invocation"' in output:
        assert "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" in output, "ansible masks the key path in the -vvv invocation"
    assert shard_counts(tls_db) == {"s_q": 4}

    messages = []
    for login in (missing_key, impostor_ca, {**password_login, "login_password": password + "-wrong"}):
        for entry_point in (lambda options: change(tls_db, "s_q", 2, login=options),
                            lambda options: info(tls_db, login=options, queue="s_q")):
            with pytest.raises(ConnectionFailed) as refusal:
                entry_point(login)
            messages.append(refusal.value.message)
    assert "(ssl_key)" in messages[0] and "password authentication failed" in messages[-1]

    everything = "\n".join([output, *messages, log_file.read_text(encoding="utf-8"),
                            tls_db.server.server_log(tail=10_000)])
    assert SECRET_MARKER not in everything
