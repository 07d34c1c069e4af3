"""Schedules: declaring them and firing an occurrence (seed invariant 5). Computing cron
instants (time zones, DST, misfire policies) belongs to the scheduler engine built on top."""
