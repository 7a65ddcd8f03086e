"""The run report: assembles the report sections the stages wrote (and the registry's decisions) into one
Markdown and one self-contained HTML page."""
