"""Attendance in Discord (issue 28 item 6): pages of a run's seated members as select menus,
opened by ``/event attendance`` or by a cue's "Take attendance" button, and a member's record
(``/event history``). The rules and the store are ``runner.attendance``'s."""
