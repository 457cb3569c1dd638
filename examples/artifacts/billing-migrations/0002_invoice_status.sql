ALTER TABLE invoices ADD COLUMN status text NOT NULL DEFAULT 'open';
