"""TPC-C's five transactions as server-side functions, as HammerDB runs them on PostgreSQL: one
round trip per transaction, so the client's cost per transaction stays small and the server does
what the seed's stored procedures did. Inputs are drawn by the driver (tpcc_driver.py)."""

PROCEDURES = r"""
CREATE OR REPLACE FUNCTION tpcc_new_order(w int, d int, c int, items int[], supply int[], qty int[])
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    o int; tax_w numeric; tax_d numeric; disc numeric; price numeric; n int := array_length(items, 1);
    all_local int := CASE WHEN supply = array_fill(w, ARRAY[n]) THEN 1 ELSE 0 END;
    dist char(24); total numeric := 0;
BEGIN
    SELECT w_tax INTO tax_w FROM warehouse WHERE w_id = w;
    UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = w AND d_id = d
        RETURNING d_tax, d_next_o_id - 1 INTO tax_d, o;
    SELECT c_discount INTO disc FROM customer WHERE c_w_id = w AND c_d_id = d AND c_id = c;
    INSERT INTO orders VALUES (o, d, w, c, now(), NULL, n, all_local);
    INSERT INTO new_order VALUES (o, d, w);
    FOR i IN 1..n LOOP
        SELECT i_price INTO price FROM item WHERE i_id = items[i];
        IF NOT FOUND THEN
            RAISE EXCEPTION 'tpcc: item % not found (the specified 1%% rollback)', items[i] USING ERRCODE = 'P0001';
        END IF;
        UPDATE stock SET s_quantity = CASE WHEN s_quantity - qty[i] >= 10 THEN s_quantity - qty[i]
                                           ELSE s_quantity - qty[i] + 91 END,
                         s_ytd = s_ytd + qty[i], s_order_cnt = s_order_cnt + 1,
                         s_remote_cnt = s_remote_cnt + (supply[i] <> w)::int
            WHERE s_i_id = items[i] AND s_w_id = supply[i]
            RETURNING CASE d WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03 WHEN 4 THEN s_dist_04
                             WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07 WHEN 8 THEN s_dist_08
                             WHEN 9 THEN s_dist_09 ELSE s_dist_10 END INTO dist;
        INSERT INTO order_line VALUES (o, d, w, i, items[i], supply[i], NULL, qty[i], qty[i] * price, dist);
        total := total + qty[i] * price;
    END LOOP;
    RETURN o;
END $$;

CREATE OR REPLACE FUNCTION tpcc_customer_by_name(w int, d int, last text) RETURNS int LANGUAGE sql AS $$
    SELECT c_id FROM (SELECT c_id, row_number() OVER (ORDER BY c_first) AS k, count(*) OVER () AS n
                      FROM customer WHERE c_w_id = w AND c_d_id = d AND c_last = last) x
    WHERE k = (n + 1) / 2
$$;

CREATE OR REPLACE FUNCTION tpcc_payment(w int, d int, cw int, cd int, c int, last text, amount numeric)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    wname text; dname text; credit char(2);
BEGIN
    UPDATE warehouse SET w_ytd = w_ytd + amount WHERE w_id = w RETURNING w_name INTO wname;
    UPDATE district SET d_ytd = d_ytd + amount WHERE d_w_id = w AND d_id = d RETURNING d_name INTO dname;
    IF last IS NOT NULL THEN
        c := tpcc_customer_by_name(cw, cd, last);
        IF c IS NULL THEN c := 1; END IF;  -- a name the small scales lack: the district's first customer
    END IF;
    UPDATE customer SET c_balance = c_balance - amount, c_ytd_payment = c_ytd_payment + amount,
                        c_payment_cnt = c_payment_cnt + 1
        WHERE c_w_id = cw AND c_d_id = cd AND c_id = c RETURNING c_credit INTO credit;
    IF credit = 'BC' THEN
        UPDATE customer SET c_data = substr(c || ' ' || cd || ' ' || cw || ' ' || d || ' ' || w || ' ' || amount
                                            || ' ' || c_data, 1, 500)
            WHERE c_w_id = cw AND c_d_id = cd AND c_id = c;
    END IF;
    INSERT INTO history VALUES (c, cd, cw, d, w, now(), amount, substr(wname || '    ' || dname, 1, 24));
    RETURN c;
END $$;

CREATE OR REPLACE FUNCTION tpcc_order_status(w int, d int, c int, last text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    o int; lines int;
BEGIN
    IF last IS NOT NULL THEN
        c := coalesce(tpcc_customer_by_name(w, d, last), 1);
    END IF;
    PERFORM c_balance, c_first, c_middle, c_last FROM customer WHERE c_w_id = w AND c_d_id = d AND c_id = c;
    SELECT o_id INTO o FROM orders WHERE o_w_id = w AND o_d_id = d AND o_c_id = c ORDER BY o_id DESC LIMIT 1;
    SELECT count(*) INTO lines FROM (SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d
                                     FROM order_line WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o) x;
    RETURN lines;
END $$;

CREATE OR REPLACE FUNCTION tpcc_delivery(w int, carrier int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    o int; c int; amount numeric; delivered int := 0;
BEGIN
    -- the oldest new order locked and waited for, never skipped: a Delivery that skipped a locked one
    -- and committed first left a committed state with a gap in new_order (condition 3), which a crash
    -- test's cut found; when the row waited for was deleted meanwhile, the district is skipped
    FOR d IN 1..10 LOOP
        SELECT no_o_id INTO o FROM new_order WHERE no_w_id = w AND no_d_id = d
            ORDER BY no_o_id LIMIT 1 FOR UPDATE;
        CONTINUE WHEN o IS NULL;
        DELETE FROM new_order WHERE no_w_id = w AND no_d_id = d AND no_o_id = o;
        UPDATE orders SET o_carrier_id = carrier WHERE o_w_id = w AND o_d_id = d AND o_id = o RETURNING o_c_id INTO c;
        UPDATE order_line SET ol_delivery_d = now() WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o;
        SELECT sum(ol_amount) INTO amount FROM order_line WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o;
        UPDATE customer SET c_balance = c_balance + amount, c_delivery_cnt = c_delivery_cnt + 1
            WHERE c_w_id = w AND c_d_id = d AND c_id = c;
        delivered := delivered + 1;
    END LOOP;
    RETURN delivered;
END $$;

CREATE OR REPLACE FUNCTION tpcc_stock_level(w int, d int, threshold int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    next_o int; low int;
BEGIN
    SELECT d_next_o_id INTO next_o FROM district WHERE d_w_id = w AND d_id = d;
    SELECT count(DISTINCT s_i_id) INTO low FROM order_line JOIN stock ON s_i_id = ol_i_id AND s_w_id = w
        WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id >= next_o - 20 AND ol_o_id < next_o AND s_quantity < threshold;
    RETURN low;
END $$;
"""

# The entry points pgbench calls: its scripts draw plain numbers; these turn them into the inputs
# (the order's items sorted against deadlocks, the specified 1% rollback, last names).
DRAWN = r"""
CREATE OR REPLACE FUNCTION tpcc_new_order_drawn(w int, d int, c int, n int, bad int, items int[], supply int[],
                                                qty int[]) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    it int[]; su int[]; qt int[];
BEGIN
    SELECT array_agg(i ORDER BY i, k), array_agg(s ORDER BY i, k), array_agg(q ORDER BY i, k) INTO it, su, qt
        FROM unnest(items[1:n], supply[1:n], qty[1:n]) WITH ORDINALITY AS x(i, s, q, k);
    IF bad > 0 THEN
        it[n] := bad;  -- an unknown item: the specification's 1% of New-Orders that roll back
    END IF;
    BEGIN
        RETURN tpcc_new_order(w, d, c, it, su, qt);
    EXCEPTION WHEN raise_exception THEN
        RETURN -1;  -- the block's changes are undone: the order is rolled back
    END;
END $$;
"""
