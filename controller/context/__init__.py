"""One pass's environment: ``PassContext`` (what a pass holds, the only way it writes
status, the ``Family`` protocol) and the fields every log line of a pass carries."""
