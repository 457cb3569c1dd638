CREATE TABLE warehouses (
    id BIGINT PRIMARY KEY,
    code VARCHAR(16) NOT NULL,
    CONSTRAINT warehouses_code_key UNIQUE (code)
);

CREATE TABLE stock (
    warehouse_id BIGINT NOT NULL,
    sku VARCHAR(64) NOT NULL,
    quantity INT NOT NULL DEFAULT 0,
    PRIMARY KEY (warehouse_id, sku),
    CONSTRAINT stock_warehouse_fk FOREIGN KEY (warehouse_id) REFERENCES warehouses (id)
);

CREATE INDEX stock_sku_idx ON stock (sku);
