"""A primary and an asynchronous streaming standby of it, on loopback ports, and failovers between them.

The standby is made with ``pg_basebackup -R`` from the primary and streams
its WAL. ``failover()`` does what an HA manager does when the primary is
lost: the primary stops, the standby is promoted, and the pair is one
primary until ``rejoin()`` makes the old primary's place a standby of the new
one (a fresh base backup), so one pair serves a whole test module.
``stop_streaming()`` stops the standby's WAL receiver, so what the primary
commits afterwards is on the primary only - what asynchronous replication
loses when the primary is lost before its standby received it.
"""

from __future__ import annotations

from .pgserver import PgServer
from .waiting import wait_until

CAUGHT_UP_SQL = "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn"


class StreamingPair:
    """A primary and (unless a failover consumed it) a standby streaming from it."""

    def __init__(self, major: int) -> None:
        self.major = major
        self.primary = PgServer(major, replication=True)
        self.standby: PgServer | None = None
        self.retired: PgServer | None = None  # the old primary, stopped, until rejoin()

    def start(self) -> StreamingPair:
        self.primary.start()
        self.standby = self._standby_of(self.primary)
        return self

    def _standby_of(self, source: PgServer) -> PgServer:
        standby = PgServer(self.major, replication=True)
        standby.init_standby_of(source)
        standby.start()
        return standby

    def login_args(self, dbname: str, *servers: PgServer) -> dict:
        """awa.operations connection options naming ``servers`` (in that order) as the superuser."""
        return {"login_host": ",".join(server.host for server in servers),
                "login_port": ",".join(str(server.port) for server in servers),
                "login_db": dbname, "login_user": "postgres"}

    def wait_caught_up(self, timeout: float = 30.0) -> None:
        """Until the standby has replayed everything the primary has written so far."""
        assert self.standby is not None, "no standby: rejoin() after a failover"
        with self.primary.connect() as conn:
            # The insert position, not pg_current_wal_lsn() (the write position): the test servers run with
            # synchronous_commit off, so a commit's record can still sit in WAL buffers behind the latter.
            target = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        with self.standby.connect() as conn:
            wait_until(lambda: conn.execute(CAUGHT_UP_SQL, (target,)).fetchone()[0], timeout,
                       f"the standby to replay up to {target}", interval=0.05)

    def stop_streaming(self, timeout: float = 30.0) -> None:
        """Stop the standby's WAL receiver: from now on, what the primary commits stays on the primary."""
        assert self.standby is not None, "no standby: rejoin() after a failover"
        self.wait_caught_up()
        with self.standby.connect() as conn:
            conn.execute("ALTER SYSTEM SET primary_conninfo = ''")
            conn.execute("SELECT pg_reload_conf()")
            wait_until(lambda: not conn.execute("SELECT count(*) FROM pg_stat_wal_receiver").fetchone()[0], timeout,
                       "the standby's WAL receiver to stop", interval=0.05)

    def stop_primary(self) -> None:
        """The primary is lost (fast shutdown): until promote_standby(), no server accepts writes."""
        assert self.standby is not None, "no standby: rejoin() after a failover"
        self.primary.stop()

    def promote_standby(self) -> None:
        """Promote the standby after stop_primary(): it is the primary from now on."""
        assert self.standby is not None, "no standby: rejoin() after a failover"
        self.standby.promote()
        self.retired, self.primary, self.standby = self.primary, self.standby, None

    def failover(self) -> None:
        """Stop the primary and promote the standby, at once."""
        self.stop_primary()
        self.promote_standby()

    def rejoin(self) -> None:
        """A standby of the current primary again, in place of the old primary (a fresh base backup)."""
        if self.retired is not None:
            self.retired.destroy()
            self.retired = None
        if self.standby is None:
            self.standby = self._standby_of(self.primary)
        self.wait_caught_up()

    def in_recovery(self, server: PgServer) -> bool:
        with server.connect() as conn:
            return bool(conn.execute("SELECT pg_is_in_recovery()").fetchone()[0])

    def destroy(self) -> None:
        for server in (self.primary, self.standby, self.retired):
            if server is not None:
                server.destroy()
