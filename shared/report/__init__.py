"""One page to look at: self-contained HTML pages of what the other tools produce (timing
results, verification, traces, lessons). No network, no external script, font or stylesheet:
styles and the small table-sorting script are inline, charts are inline SVG, text stays text.

- `html`: the page skeleton, escaping, sortable tables, code blocks.
- `svg`: line and bar charts in a colour-blind-safe palette, each series also told apart by its
  marker and dash pattern and labelled in text, so no information rests on colour alone.
- `pages`: the pages themselves (results, trace, lessons).

May import `shared.core` and read the other tools' JSON documents; imports no framework.
"""
