-- Run by mariadbd (--init-file) on every start, before it accepts a connection: the
-- scratch database and its user, no password, reachable over loopback TCP (127.0.0.1,
-- since the server resolves no names) and the server's socket (localhost). The
-- whole server is the Pod's and is thrown away with it, so the user may do anything
-- a desired state's normalization needs (create and drop schemas included).
CREATE DATABASE IF NOT EXISTS scratch;
CREATE USER IF NOT EXISTS 'scratch'@'127.0.0.1';
CREATE USER IF NOT EXISTS 'scratch'@'localhost';
GRANT ALL PRIVILEGES ON *.* TO 'scratch'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'scratch'@'localhost' WITH GRANT OPTION;
