"""Services: each one fetches its inputs through the adapters and applies the domain's decisions."""
