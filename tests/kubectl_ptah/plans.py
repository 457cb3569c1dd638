"""A destructive plan's statement files, as the plugin shows them for approval."""

from __future__ import annotations

DESTRUCTIVE_PLAN = (
    b"CREATE TABLE orders_v2 (id bigint PRIMARY KEY, note text DEFAULT 'a;b');\n",
    b"DROP TABLE orders_legacy;\nGRANT SELECT ON orders_v2 TO reporting;\n",
)
