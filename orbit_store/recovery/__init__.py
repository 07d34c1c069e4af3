"""Surviving a crash or a restore (seed §7): the durable settings checked at start-up, the fence
procedure after a restore from backup, and the read-only check that no invariant is broken.

``orbit_store.fencing`` (the restore epoch every grant is checked against) stays outside: Pulse
reads it on each grant, while the fence procedure here builds on Pulse."""
