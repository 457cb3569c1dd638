CREATE TABLE customers (
    id bigint PRIMARY KEY,
    email text NOT NULL UNIQUE
);

CREATE TABLE orders (
    id bigint PRIMARY KEY,
    customer_id bigint NOT NULL REFERENCES customers (id),
    placed_at timestamptz NOT NULL DEFAULT now(),
    total numeric(12, 2) NOT NULL
);

CREATE INDEX orders_customer_id_idx ON orders (customer_id);
