"""The results store and its readers: the DuckDB store, queries over it, costs, run lifecycle
(create / resume / finish), the regression gate's score layer and the reported numbers of papers."""
