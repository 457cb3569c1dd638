"""The stages one pass runs, shared by both families: claim writes, supervision, the
dispatch steps, readings, planning, binding rotation, retirement, the realm gate. A
stage asks the pass's ``Family`` for what differs and never branches on its type."""
