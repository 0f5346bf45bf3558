"""dbtier: will faster storage help this database, by how much, and where should it go?"""

__version__ = "0.1.0"
