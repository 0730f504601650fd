"""Applications over the library: evaluate, run, distill, backtranslate (with chunked), serve, report and
export. They import the library; the library never imports them."""
