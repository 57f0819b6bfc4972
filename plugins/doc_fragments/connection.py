# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connection options shared by every awa.operations module (community.postgresql names)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  login_user:
    description:
      - The role to connect as.
      - It needs to own the Awa lane tables or be a member of their owner (for example Awa's
        C(awa_migrator)); the exact privileges are in
        L(Least privilege,https://github.com/awa-operations/awa.operations/blob/main/docs/enqueue_shards.md#least-privilege).
      - When not given, C(PGUSER) is used if it is set.
    type: str
    default: postgres
  login_password:
    description:
      - The password of O(login_user).
      - When empty, libpq looks for a password in C(PGPASSWORD) and C(~/.pgpass).
    type: str
    default: ''
  login_host:
    description:
      - Host name or IP address of the PostgreSQL server, or several separated by commas (for example
        V(db1.example.com,db2.example.com)), the servers of a primary and its standbys. libpq tries them in turn
        and keeps the first of the kind O(target_session_attrs) asks for, so after a failover the same task
        reaches the new primary.
      - When empty, libpq connects through a Unix socket (see O(login_unix_socket)) or uses C(PGHOST).
    type: str
    default: ''
  login_port:
    description:
      - TCP port of the PostgreSQL server; one port for every host of O(login_host), or a comma-separated list
        with one port per host, in the same order (for example V(5432,5433)). A list of another length is refused
        before connecting.
      - When not given, C(PGPORT) is used if it is set.
    type: raw
    default: 5432
  login_unix_socket:
    description:
      - Directory of the server's Unix socket, used when O(login_host) is empty or C(localhost).
    type: str
    default: ''
  login_db:
    description:
      - The database that holds the Awa schema.
      - When not set, libpq's default applies (C(PGDATABASE), else the name of the login role).
    type: str
  ssl_mode:
    description:
      - Whether and how to use SSL, as libpq's C(sslmode).
      - Use V(verify-full) with O(ca_cert) to encrypt and to check that the server is the one
        O(login_host) names; V(prefer) encrypts when the server offers it but checks nothing.
      - When not given, C(PGSSLMODE) is used if it is set.
    type: str
    default: prefer
    choices: [allow, disable, prefer, require, verify-ca, verify-full]
  ca_cert:
    description:
      - A file of SSL certificate authority certificates (libpq C(sslrootcert)).
    type: path
  ssl_cert:
    description:
      - The client SSL certificate file (libpq C(sslcert)).
    type: path
  ssl_key:
    description:
      - The client SSL private key file (libpq C(sslkey)), readable only by the user that runs the module.
      - Its path is treated as a secret and never shown in results or messages.
    type: path
  target_session_attrs:
    version_added: 0.2.0
    description:
      - Which server of O(login_host) to keep, as libpq's C(target_session_attrs) - V(read-write) or V(primary)
        keep a primary, V(standby) and V(read-only) a standby, V(prefer-standby) a standby when one answers,
        V(any) the first that answers.
      - When not given, C(PGTARGETSESSIONATTRS) is used if it is set; otherwise M(awa.operations.awa_enqueue_shards)
        uses V(read-write) and M(awa.operations.awa_enqueue_shards_info) uses V(primary).
      - The change writes, so M(awa.operations.awa_enqueue_shards) accepts only V(read-write) and V(primary) and
        refuses the others before connecting. Reads default to the primary so that a wait judges the state the
        change wrote rather than a standby's copy of it, which lags; V(primary) rather than V(read-write), so a
        role whose transactions are read-only by default can still read. To read a standby on purpose (a
        dashboard), set V(any), V(prefer-standby) or V(standby) - its state can lag the primary's.
    type: str
    choices: [any, read-write, read-only, primary, standby, prefer-standby]
  connect_params:
    description:
      - Any other libpq connection parameters, for example C(connect_timeout) or C(keepalives_idle).
      - They take precedence over the options above.
    type: dict
    default: {}
  session_role:
    description:
      - A role every transaction of the module switches to (C(SET LOCAL ROLE)); the work is done with its
        privileges, and objects it creates are owned by it.
      - It is set per transaction, never for the session, so it ends with each transaction and never reaches
        another client of a transaction pooler such as PgBouncer.
      - O(login_user) must be a member of it; the module checks that right after connecting.
    type: str
requirements:
  - Python 3.10 or newer on the host that runs the module (the Pythons psycopg 3.3 runs on); the module refuses an
    older one, naming it
  - psycopg >= 3.1 (psycopg 3) on the host that runs the module
notes:
  - Connections identify themselves as C(application_name=awa.operations) in C(pg_stat_activity).
  - libpq's environment on the host that runs the module is used for what the task does not give, as
    community.postgresql does - C(PGUSER), C(PGPORT), C(PGSSLMODE) and C(PGTARGETSESSIONATTRS) as above, and
    libpq itself reads C(PGHOST), C(PGDATABASE), C(PGPASSWORD), C(PGSSLROOTCERT), C(PGSSLCERT), C(PGSSLKEY),
    C(PGCONNECT_TIMEOUT) (else 10 seconds) and the others. An option the task gives always wins.
  - The connection options have the names community.postgresql uses, so the same variables serve both. Its
    aliases (C(port), C(db), C(ssl_rootcert), ...) are not accepted - use the option names.
"""
