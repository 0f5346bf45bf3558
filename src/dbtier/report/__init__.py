"""Reports: terminal tables, JSON results, HTML pages."""
