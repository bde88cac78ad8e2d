-- The three tables of an export directory as views (DIR is the directory `decode-lab
-- export --parquet -o DIR` wrote; a glob such as 'DIR/*/runs.parquet' reads many at once).
CREATE VIEW runs AS SELECT * FROM read_parquet('DIR/runs.parquet');
CREATE VIEW steps AS SELECT * FROM read_parquet('DIR/steps.parquet');
CREATE VIEW outcomes AS SELECT * FROM read_parquet('DIR/outcomes.parquet');
