"""report.json and report.html: the views, the page, its charts."""
