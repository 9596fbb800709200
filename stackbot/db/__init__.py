"""The SQL adapter: engine, sessions, schema models and migrations. Only this package imports
SQLAlchemy / SQLModel."""
