"""refbench: validate and rate a server + storage stack for database and analytics workloads."""

__version__ = "0.1.0"
