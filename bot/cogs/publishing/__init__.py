"""An uploaded definition: read and checked in a process of its own, previewed, then published
by a button (the ``/event validate`` and ``/event publish`` commands live in ``control``)."""
