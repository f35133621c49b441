# Each block: a layout file, a default database, unlisted rule; then one
# statement per line. routes.out holds where each goes (UPDATE_GOLDEN=1).
@layout part.json tpcc_shard default_group
SELECT w_name FROM warehouse WHERE w_id = 6
select w_name from warehouse where w_id = '7'
SELECT * FROM warehouse WHERE w_id = -1
SELECT * FROM warehouse WHERE w_id IN (1, 5, 9)
SELECT * FROM warehouse WHERE w_id IN (1, 2)
SELECT * FROM warehouse WHERE w_id = 1 OR w_id = 5
SELECT * FROM warehouse WHERE w_id = 1 OR w_tax > 0
SELECT * FROM warehouse WHERE w_id = 1 AND w_id = 2
SELECT * FROM warehouse WHERE w_id = NULL
SELECT * FROM warehouse WHERE w_id BETWEEN 1 AND 2
SELECT * FROM warehouse
SELECT * FROM warehouse WHERE (w_id = 3)
SELECT * FROM tpcc_shard.warehouse w WHERE w.w_id = 3
SELECT * FROM other.warehouse WHERE w_id = 3
SELECT COUNT(*) FROM warehouse
SELECT COUNT(*) FROM warehouse WHERE w_id = 2
SELECT * FROM warehouse ORDER BY w_id
SELECT * FROM warehouse ORDER BY w_id LIMIT 5
SELECT DISTINCT w_name FROM warehouse
SELECT w_name, SUM(w_ytd) FROM warehouse GROUP BY w_name
SELECT c.c_last, d.d_name FROM customer c JOIN district d ON c.c_w_id = d.d_w_id AND c.c_d_id = d.d_id WHERE c.c_w_id = 3
SELECT c.c_last, d.d_name FROM customer c JOIN district d ON c.c_w_id = d.d_w_id AND c.c_d_id = d.d_id
SELECT c.c_last, d.d_name FROM customer c JOIN district d ON c.c_d_id = d.d_id
SELECT c.c_last FROM customer c, district d WHERE c.c_w_id = d.d_w_id
SELECT s_quantity, i_name FROM stock JOIN item ON s_i_id = i_id WHERE s_w_id = 2
SELECT i_name FROM item WHERE i_id = 5
UPDATE item SET i_price = 1 WHERE i_id = 5
SELECT * FROM warehouse WHERE w_id IN (SELECT d_w_id FROM district WHERE d_w_id = 1)
SELECT * FROM warehouse WHERE w_id = 1 AND EXISTS (SELECT 1 FROM district WHERE d_w_id = 2)
SELECT * FROM warehouse WHERE w_id IN (SELECT d_w_id FROM district)
SELECT * FROM (SELECT * FROM warehouse) AS x
SELECT * FROM warehouse WHERE w_id = 1 UNION SELECT * FROM warehouse WHERE w_id = 5
SELECT w_id FROM warehouse UNION SELECT d_w_id FROM district
SELECT w_id FROM warehouse WHERE w_id = 1 UNION ALL SELECT w_id FROM warehouse WHERE w_id = 2
INSERT INTO warehouse (w_id, w_name) VALUES (1, 'a')
INSERT INTO warehouse (w_name, w_id) VALUES ('a', 2), ('b', 6)
INSERT INTO warehouse (w_name, w_id) VALUES ('a', 2), ('b', 3)
INSERT INTO warehouse VALUES (1, 'a')
INSERT INTO warehouse (w_name) VALUES ('a')
INSERT INTO warehouse (w_id, w_name) VALUES (NULL, 'a')
INSERT INTO warehouse (w_id, w_name) VALUES (1 + 1, 'a')
INSERT INTO warehouse SET w_id = 7, w_name = 'x'
INSERT INTO warehouse (w_id, w_ytd) VALUES (3, 1) ON DUPLICATE KEY UPDATE w_ytd = w_ytd + 1
INSERT INTO warehouse (w_id, w_ytd) VALUES (3, 1) ON DUPLICATE KEY UPDATE w_id = 4
INSERT INTO warehouse (w_id) SELECT d_w_id FROM district WHERE d_w_id = 1
REPLACE INTO warehouse (w_id, w_name) VALUES (4, 'a')
INSERT INTO item (i_id, i_name) VALUES (1, 'a')
UPDATE warehouse SET w_ytd = w_ytd + 1 WHERE w_id = 5
UPDATE warehouse SET w_ytd = 0
UPDATE warehouse SET w_id = 9 WHERE w_id = 5
UPDATE warehouse SET w_id = 6 WHERE w_id = 5
DELETE FROM warehouse WHERE w_id = 8
DELETE FROM warehouse WHERE w_id > 8
CREATE TABLE warehouse2 (id INT)
CREATE TABLE warehouse (w_id INT PRIMARY KEY, w_name VARCHAR(10))
ALTER TABLE customer ADD COLUMN c_note VARCHAR(20)
DROP TABLE IF EXISTS warehouse, item
TRUNCATE TABLE history
SELECT 1
SELECT @@version
SET autocommit = 0
BEGIN
SHOW TABLES
SELECT * FROM information_schema.tables
SELECT * FROM warehouse WHERE w_id = 1 FOR UPDATE
SELECT * FROM warehouse WHERE w_id = 1 LOCK IN SHARE MODE
LOCK TABLES warehouse WRITE
SELECT * FROM warehouse w JOIN other.t x ON w.w_id = x.id WHERE w.w_id = 1
@layout sharding.json shop default_group
SELECT * FROM orders WHERE customer_id = 11
SELECT * FROM sessions WHERE token = 'abc'
SELECT * FROM sessions WHERE token = 'it''s'
SELECT * FROM invoices WHERE invoice_no = 1500
SELECT * FROM invoices WHERE invoice_no BETWEEN 900 AND 1500
SELECT * FROM invoices WHERE invoice_no > 2500
SELECT * FROM invoices WHERE invoice_no <= 1000
SELECT * FROM invoices WHERE invoice_no < 1000 OR invoice_no > 3000
SELECT * FROM events WHERE created_at = '2024-06-01 10:00:00'
SELECT * FROM events WHERE created_at >= '2025-02-01'
SELECT * FROM users WHERE name = 'hannah'
SELECT * FROM users WHERE name BETWEEN 'a' AND 'h'
SELECT * FROM settings
SELECT * FROM orders o JOIN order_items i USING (customer_id)
SELECT * FROM orders o JOIN invoices i ON o.customer_id = i.invoice_no
SELECT * FROM orders o JOIN settings s ON 1 = 1 WHERE o.customer_id = 5
SELECT * FROM nowhere
@layout part.json tpcc_shard default_group
/*# group="all" */ CREATE DATABASE IF NOT EXISTS tpcc_shard
/*# group="all" */ CREATE TABLE t1 (id INT)
/*# group="all" */ SELECT COUNT(*) FROM warehouse
/*# group="all" */ UPDATE item SET i_price = 1
/*# group="data3" */ SELECT COUNT(*) FROM warehouse
/*# group="data9" */ SELECT 1
/*# table="warehouse" key="6" */ SELECT COUNT(*) FROM stock
/*# table="tpcc_shard.warehouse" key="7" */ DELETE FROM stock WHERE s_i_id = 1
/*# table="item" key="7" */ SELECT 1
/*# table="nothere" key="7" */ SELECT 1
SELECT w_id, w_name FROM warehouse ORDER BY w_name
SELECT w_id, w_name FROM warehouse ORDER BY w_id DESC, 2 LIMIT 10
SELECT w_id AS id, w_name FROM warehouse /* c */ ORDER BY id LIMIT 5, 10 FOR UPDATE
SELECT * FROM warehouse ORDER BY w_ytd LIMIT 10 OFFSET 1000000
SELECT * FROM warehouse LIMIT 3
SELECT * FROM warehouse ORDER BY 1
SELECT * FROM warehouse ORDER BY FIELD(w_id, 3, 1)
SELECT * FROM warehouse ORDER BY w_tax * 2
SELECT * FROM warehouse WHERE w_id IN (1, 2) ORDER BY w_name
SELECT * FROM warehouse WHERE w_id = 1 ORDER BY w_name LIMIT 1
SELECT COUNT(*), SUM(w_ytd), MIN(w_id), MAX(w_name) FROM warehouse
SELECT COUNT(*) AS n FROM warehouse WHERE w_tax > 1
SELECT COUNT(DISTINCT w_name) FROM warehouse
SELECT AVG(w_ytd) FROM warehouse
SELECT COUNT(*) FROM warehouse ORDER BY 1
SELECT COUNT(*) FROM warehouse WHERE w_id IN (SELECT s_w_id FROM stock)
SELECT w_id, COUNT(*) FROM warehouse
SELECT w_name, COUNT(*) AS n, AVG(w_ytd) FROM warehouse GROUP BY w_name HAVING COUNT(*) > 1 ORDER BY n DESC LIMIT 5
SELECT w_name, COUNT(*) FROM warehouse GROUP BY w_name HAVING w_name LIKE 'a%' ORDER BY w_name DESC LIMIT 2, 3
SELECT w_tax, w_name, SUM(DISTINCT w_ytd), COUNT(DISTINCT w_ytd) FROM warehouse WHERE w_id > 2 GROUP BY 2, w_tax
SELECT w_name FROM warehouse GROUP BY w_name ORDER BY MAX(w_ytd) DESC, w_name
SELECT w_name, COUNT(*) AS n FROM warehouse GROUP BY w_name HAVING n BETWEEN 2 AND 5 OR MIN(w_tax) IS NULL
SELECT DISTINCT w_name, w_tax FROM warehouse ORDER BY w_tax LIMIT 10
SELECT SUM(w_ytd) / COUNT(*) FROM warehouse
SELECT GROUP_CONCAT(w_name) FROM warehouse
SELECT COUNT(DISTINCT w_name), COUNT(DISTINCT w_tax) FROM warehouse
SELECT UPPER(w_name), COUNT(*) FROM warehouse GROUP BY w_name ORDER BY 1
SELECT *, COUNT(*) FROM warehouse GROUP BY w_id
SELECT w_name, COUNT(*) FROM warehouse GROUP BY w_name HAVING COUNT(*) > 1.5
SELECT w_name, COUNT(*) FROM warehouse GROUP BY w_name WITH ROLLUP
SELECT w_name, COUNT(*) FROM warehouse GROUP BY w_name HAVING COUNT(*) > SUM(w_tax)
SELECT w_id % 2, COUNT(*) FROM warehouse GROUP BY w_id % 2
SELECT w_name, COUNT(*) FROM warehouse WHERE w_id = 3 GROUP BY w_name HAVING COUNT(*) > 1.5
SELECT w_name, SUM(w_ytd) * 2 FROM warehouse GROUP BY w_name
# Writes to several groups: one distributed transaction; an INSERT's rows
# split by group (values with commas and parentheses stay whole).
@layout part.json tpcc_shard global
INSERT INTO warehouse (w_id, w_name) VALUES (1, 'a,(b)'), (2, CONCAT('x', 'y')), (5, 'c') ON DUPLICATE KEY UPDATE w_name = VALUES(w_name)
insert into warehouse (w_id, w_name) values (3,'q'),(4,'r')
INSERT INTO warehouse (w_id, w_name) VALUE (7, 'a'), (8, 'b')
UPDATE warehouse SET w_ytd = 0 WHERE w_id IN (1, 2)
DELETE FROM warehouse WHERE w_id > 2 LIMIT 10
UPDATE customer c JOIN district d ON c.c_w_id = d.d_w_id SET c.c_balance = 0 WHERE d.d_w_id IN (1, 2)
UPDATE customer c JOIN district d ON c.c_d_id = d.d_id SET c.c_balance = 0
UPDATE item SET i_price = 1 WHERE i_id = 5
INSERT INTO item (i_id, i_name) VALUES (1, 'a'), (2, 'b')
# A value each copy would compute for itself: refused.
INSERT INTO item (i_id, i_name) VALUES (3, UUID())
UPDATE item SET i_data = NOW(6) WHERE i_id = 5
UPDATE item SET i_data = CURRENT_TIMESTAMP WHERE i_id = 5
UPDATE item SET i_price = RAND() * 10
UPDATE item SET i_name = @name WHERE i_id = 5
UPDATE item SET i_name = @@hostname WHERE i_id = 5
UPDATE item SET i_name = 'now()' WHERE i_id = 5
UPDATE item SET i_name = 'x' WHERE `uuid` = 5
DELETE FROM item
# Row constructors: the shard key's place in each tuple.
@layout part.json tpcc_shard default_group
DELETE FROM new_orders WHERE (no_w_id, no_d_id, no_o_id) IN ((3, 1, 2101), (3, 2, 2101))
UPDATE orders SET o_carrier_id = 5 WHERE (o_w_id, o_d_id, o_id) IN ((1, 1, 7), (2, 1, 7))
SELECT o_d_id, o_c_id FROM orders WHERE (o_d_id, o_id) IN ((1, 7), (2, 7))
@layout part.json tpcc_shard global
# A global table's rows with a sharded table's inside: each group would
# answer for the global rows once; exact only when each result row holds
# one row of a sharded table of the statement's own FROM.
SELECT COUNT(*) FROM item i LEFT JOIN stock s ON s.s_i_id = i.i_id
SELECT COUNT(*) FROM stock s LEFT JOIN item i ON s.s_i_id = i.i_id
SELECT i_name FROM item i RIGHT JOIN stock s ON s.s_i_id = i.i_id
SELECT i_name FROM stock s RIGHT JOIN item i ON s.s_i_id = i.i_id
SELECT COUNT(*) FROM item WHERE i_id IN (SELECT s_i_id FROM stock)
SELECT i_name FROM item WHERE NOT EXISTS (SELECT 1 FROM stock WHERE s_i_id = i_id)
SELECT i_name FROM item WHERE i_price = (SELECT MAX(s_quantity) FROM stock)
SELECT (SELECT COUNT(*) FROM stock)
SELECT i_name FROM item JOIN stock ON s_i_id = i_id
SELECT s_quantity FROM stock WHERE s_i_id IN (SELECT i_id FROM item WHERE i_price > 5)
SELECT i_price, i_name FROM item WHERE i_id = 5
SELECT s_quantity, i_name FROM stock JOIN item ON s_i_id = i_id WHERE s_w_id = 2
# Keys equal to a restricted key: restricted too (inner joins and WHERE
# only: a LEFT JOIN's right side does not narrow its left).
@layout part.json tpcc_shard global
SELECT c_discount, c_last, c_credit, w_tax FROM customer, warehouse WHERE w_id = 3 AND c_w_id = w_id AND c_d_id = 1 AND c_id = 7
SELECT c.c_last FROM customer c JOIN district d ON c.c_w_id = d.d_w_id WHERE d.d_w_id = 2
SELECT c.c_last FROM customer c JOIN district d USING (c_w_id) WHERE c.c_w_id = 5
SELECT w.w_name, d.d_name FROM warehouse w LEFT JOIN district d ON d.d_w_id = w.w_id AND d.d_w_id = 1
SELECT w.w_name FROM warehouse w LEFT JOIN district d ON d.d_w_id = w.w_id WHERE w.w_id = 1
SELECT c.c_last FROM customer c JOIN district d ON c.c_w_id = d.d_w_id WHERE d.d_w_id = 2 AND c.c_w_id = 3
@layout part.json tpcc_shard default_group
# HAVING on an aggregate's alias is decided on the combined values
SELECT w_name, COUNT(*) AS n FROM warehouse GROUP BY w_name HAVING n > 3
SELECT COUNT(*) AS n FROM warehouse HAVING n > 6
SELECT w_name, AVG(w_ytd) AS a FROM warehouse GROUP BY w_name HAVING a > 10
SELECT w_name, SUM(w_ytd) / COUNT(*) AS r FROM warehouse GROUP BY w_name HAVING r > 10
SELECT w_name AS k, COUNT(*) FROM warehouse GROUP BY w_name HAVING k LIKE 'a%'
# select modifiers
SELECT SQL_CALC_FOUND_ROWS w_id FROM warehouse ORDER BY w_id LIMIT 5
SELECT SQL_NO_CACHE w_id FROM warehouse ORDER BY w_id LIMIT 5
SELECT HIGH_PRIORITY SQL_SMALL_RESULT w_id FROM warehouse ORDER BY w_id LIMIT 5
SELECT STRAIGHT_JOIN SQL_BUFFER_RESULT w_id FROM warehouse ORDER BY w_id LIMIT 5
SELECT DISTINCTROW w_name FROM warehouse
SELECT SQL_BIG_RESULT w_name, COUNT(*) FROM warehouse GROUP BY w_name
# executable comments: code only where the server runs them; refused
# while the servers' version is not known
SELECT COUNT(*) FROM warehouse WHERE w_tax = 9 /*!999999 AND w_id = 3 */
SELECT COUNT(*) FROM warehouse WHERE w_tax = 9 /*! AND w_id = 3 */
@server 5.5.5-10.11.6-MariaDB-0+deb12u1
SELECT COUNT(*) FROM warehouse WHERE w_tax = 9 /*!999999 AND w_id = 3 */
UPDATE warehouse SET w_name = 'x' WHERE w_tax = 9 /*!999999 AND w_id = 5 */
SELECT COUNT(*) FROM warehouse WHERE w_tax = 9 /*!101106 AND w_id = 3 */
SELECT COUNT(*) FROM warehouse WHERE w_tax = 9 /*!100000 AND w_id = 3 */
SELECT COUNT(*) FROM warehouse WHERE w_tax = 9 /*!50708 AND w_id = 3 */
SELECT COUNT(*) FROM warehouse WHERE w_tax = 9 /*M!50708 AND w_id = 3 */
SELECT COUNT(*) FROM warehouse WHERE w_tax = 9 /*M!999999 AND w_id = 3 */
UPDATE warehouse SET w_name = 'x' WHERE w_tax = 9 /*M!100000 AND w_id = 5 */
@server 8.0.36
SELECT COUNT(*) FROM warehouse WHERE w_tax = 9 /*!80036 AND w_id = 3 */
SELECT COUNT(*) FROM warehouse WHERE w_tax = 9 /*M!50100 AND w_id = 3 */
# negation, and refusals that name what they refuse
@layout part.json tpcc_shard default_group
SELECT w_name FROM warehouse WHERE !(w_id = 5)
SELECT w_name FROM warehouse WHERE NOT (w_id = 5)
SELECT w_name FROM warehouse WHERE w_id = 3 AND !(w_tax > 1)
SELECT w_id FROM warehouse ORDER BY NULL
SELECT w_id, w_name FROM warehouse GROUP BY w_id, w_name ORDER BY NULL
SELECT w_id, ROW_NUMBER() OVER (ORDER BY w_id) FROM warehouse
SELECT w_name FROM warehouse WHERE w_id = (SELECT 5)
# subqueries correlated on the shard key run in each group
SELECT c_last FROM customer c WHERE EXISTS (SELECT 1 FROM district d WHERE d.d_w_id = c.c_w_id)
SELECT c_last FROM customer WHERE c_w_id IN (SELECT d_w_id FROM district WHERE d_tax > 1)
SELECT c_last FROM customer c WHERE c.c_w_id = 3 AND EXISTS (SELECT 1 FROM district d WHERE d.d_w_id = c.c_w_id)
@layout part.json tpcc_shard default_group
UPDATE district SET d_ytd = d_ytd + 1 WHERE d_w_id IN (SELECT w_id FROM warehouse WHERE w_tax = 10)
# within one group a statement sextant cannot read runs there: the answer is the server's
@layout part.json tpcc_shard default_group
SELECT w_name, COUNT(*) FROM warehouse WHERE w_id = 3 GROUP BY w_name WITH ROLLUP
UPDATE warehouse SET w_tax = 1 WHERE w_id = 3 ORDER BY w_name LIMIT 1
DELETE FROM warehouse WHERE w_id = 3 ORDER BY w_name LIMIT 1
EXPLAIN SELECT * FROM warehouse WHERE w_id = 3
EXPLAIN SELECT * FROM warehouse
EXPLAIN UPDATE warehouse SET w_tax = 1 WHERE w_id = 3
SELECT w_id FROM warehouse ORDER BY w_id LIMIT 2, 18446744073709551615
SELECT w_id FROM warehouse WHERE w_id = 3 LIMIT 2, 18446744073709551615
INSERT INTO warehouse (w_id, w_name) VALUES (-9223372036854775808, 'x')
INSERT INTO warehouse (w_id, w_name) VALUES (9223372036854775807, 'x')
SELECT w_name, (SELECT MAX(i_price) FROM item) FROM warehouse
EXPLAIN FORMAT=JSON SELECT * FROM warehouse WHERE w_id = 7
DESCRIBE warehouse
UPDATE warehouse SET w_tax = 1 ORDER BY w_name LIMIT 1
SELECT w_name, COUNT(*) FROM warehouse GROUP BY w_name WITH ROLLUP
EXPLAIN SELECT w_name, COUNT(*) FROM warehouse WHERE w_id = 3 GROUP BY w_name WITH ROLLUP
# the server's own schemas, and temporary tables named like layout tables
@layout part.json tpcc_shard global
SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'tpcc_shard'
SELECT * FROM information_schema.columns WHERE table_name = 'warehouse'
SELECT * FROM mysql.user
SELECT * FROM performance_schema.threads
CREATE TEMPORARY TABLE item (x INT)
CREATE TEMPORARY TABLE warehouse (x INT)
CREATE TEMPORARY TABLE tmp_x (x INT)
DROP TEMPORARY TABLE item
SELECT * FROM tmp_x
