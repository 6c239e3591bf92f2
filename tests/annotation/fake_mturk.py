"""A small stand-in for the MTurk requester API on 127.0.0.1, for tests.

It answers the JSON 1.1 protocol boto3 speaks (``POST /`` with ``X-Amz-Target:
MTurkRequesterServiceV20170117.<Operation>`` and ``application/x-amz-json-1.1``), so boto3 pointed
at it through ``endpoint_url`` runs its real serialization, signing and parsing. It keeps state:
HITs, assignments (workers accept through ``accept`` and submit by posting the assignmentId to
``/mturk/externalSubmit`` like MTurk's own endpoint), approvals, rejections, bonuses, blocks,
qualifications and notifications, and it refuses what the real service refuses with a
``RequestError`` (approving an approved assignment, reusing a UniqueRequestToken, deleting a HIT
that is still assignable...). ``throttle(n)`` makes the next n calls fail with
``ThrottlingException``; ``valid_keys`` rejects other access keys with
``UnrecognizedClientException``.
"""
from __future__ import annotations

import json
import re
import secrets
import string
import threading
import time
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

TARGET = "MTurkRequesterServiceV20170117."


class Refused(Exception):
    def __init__(self, code: str, message: str, status: int = 400):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def _id(n: int = 30) -> str:
    return "".join(secrets.choice(string.ascii_uppercase + string.digits) for _ in range(n))


class FakeMTurk:
    def __init__(self):
        self.lock = threading.RLock()
        self.hits: dict[str, dict] = {}
        self.hits_all: dict[str, dict] = {}  # every HIT ever made, deleted ones too (for paid_cents)
        self.assignments: dict[str, dict] = {}
        self.tokens: dict[str, str] = {}  # UniqueRequestToken -> HITId
        self.bonuses: list[dict] = []
        self.bonus_tokens: set[str] = set()
        self.blocks: dict[str, str] = {}
        self.qualification_types: dict[str, dict] = {}
        self.qualified: list[tuple[str, str, int]] = []
        self.notifications: list[dict] = []
        self.external_submits: list[dict] = []
        self.calls: list[str] = []
        self.valid_keys: set[str] | None = None
        self._throttle = 0
        self._throttle_ops: set[str] | None = None
        self.server = None
        self.thread = None

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> "FakeMTurk":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                fake._handle(self)

            def do_GET(self):
                fake._send(self, 404, b"not found", "text/plain")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    # -- what tests drive ----------------------------------------------------------------------------
    def throttle(self, n: int, operations=None) -> None:
        with self.lock:
            self._throttle = n
            self._throttle_ops = set(operations) if operations else None

    def accept(self, hit_id: str, worker_id: str) -> str:
        """A worker accepts the HIT on MTurk: a new assignment, not listed until submitted."""
        with self.lock:
            hit = self.hits[hit_id]
            if hit["Expiration"] < time.time():
                raise Refused("RequestError", "This HIT is no longer available.")
            mine = [a for a in self.assignments.values() if a["HITId"] == hit_id]
            if any(a["WorkerId"] == worker_id for a in mine):
                raise Refused("RequestError", "You already worked on this HIT.")
            if len(mine) >= hit["MaxAssignments"]:
                raise Refused("RequestError", "No assignments are left on this HIT.")
            aid = _id()
            self.assignments[aid] = {"AssignmentId": aid, "WorkerId": worker_id, "HITId": hit_id,
                                     "AssignmentStatus": "Accepted", "AcceptTime": time.time(),
                                     "Answer": "", "RequesterFeedback": ""}
            return aid

    def submit(self, assignment_id: str, answers: dict | None = None) -> bool:
        with self.lock:
            a = self.assignments.get(assignment_id)
            if a is None or a["AssignmentStatus"] != "Accepted":
                return False
            a["AssignmentStatus"] = "Submitted"
            a["SubmitTime"] = time.time()
            a["AutoApprovalTime"] = a["SubmitTime"] + self.hits[a["HITId"]]["AutoApprovalDelayInSeconds"]
            fields = "".join(f"<Answer><QuestionIdentifier>{k}</QuestionIdentifier><FreeText>{v}</FreeText></Answer>"
                             for k, v in (answers or {}).items())
            a["Answer"] = ('<?xml version="1.0" encoding="UTF-8"?><QuestionFormAnswers xmlns="http://mechanicalturk.'
                           'amazonaws.com/AWSMechanicalTurkDataSchemas/2005-10-01/QuestionFormAnswers.xsd">'
                           f"{fields}</QuestionFormAnswers>")
            return True

    def paid_cents(self) -> dict:
        """What MTurk paid workers: rewards of approved assignments and bonuses (fees apart)."""
        with self.lock:
            rewards = sum(_cents(self.hits_all[a["HITId"]]["Reward"]) for a in self.assignments.values()
                          if a["AssignmentStatus"] == "Approved")
            bonuses = sum(_cents(b["BonusAmount"]) for b in self.bonuses)
            return {"rewards": rewards, "bonuses": bonuses, "total": rewards + bonuses}

    def count(self, operation: str) -> int:
        return sum(1 for c in self.calls if c == operation)

    # -- HTTP ---------------------------------------------------------------------------------------
    def _send(self, handler, status: int, body: bytes, ctype: str) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", ctype)
        handler.send_header("Content-Length", str(len(body)))
        handler.send_header("x-amzn-RequestId", _id(20))
        handler.end_headers()
        handler.wfile.write(body)

    def _handle(self, handler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        if handler.path.startswith("/mturk/externalSubmit"):
            form = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace")).items()}
            with self.lock:
                self.external_submits.append(form)
                ok = self.submit(form.get("assignmentId", ""), {k: v for k, v in form.items() if k != "assignmentId"})
            body = (b"<!doctype html><title>HIT submitted</title><h1 id='mturk-done'>HIT submitted</h1>" if ok else
                    b"<!doctype html><title>Not submitted</title><h1 id='mturk-refused'>This assignment cannot be "
                    b"submitted</h1>")
            return self._send(handler, 200 if ok else 400, body, "text/html; charset=utf-8")
        target = handler.headers.get("X-Amz-Target", "")
        if not target.startswith(TARGET) or "amz-json-1.1" not in handler.headers.get("Content-Type", ""):
            return self._error(handler, Refused("UnknownOperationException", "Unknown target", 400))
        operation = target[len(TARGET):]
        auth = handler.headers.get("Authorization", "")
        key = re.search(r"Credential=([^/]+)/", auth)
        try:
            if not auth.startswith("AWS4-HMAC-SHA256") or key is None:
                raise Refused("MissingAuthenticationTokenException", "Request is missing Authentication Token", 400)
            if self.valid_keys is not None and key.group(1) not in self.valid_keys:
                raise Refused("UnrecognizedClientException", "The security token included in the request is invalid.")
            with self.lock:
                self.calls.append(operation)
                if self._throttle and (self._throttle_ops is None or operation in self._throttle_ops):
                    self._throttle -= 1
                    raise Refused("ThrottlingException", "Rate exceeded")
                params = json.loads(raw or b"{}")
                method = getattr(self, f"op_{operation}", None)
                if method is None:
                    raise Refused("UnknownOperationException", f"{operation} is not implemented by the fake")
                result = method(params)
        except Refused as exc:
            return self._error(handler, exc)
        self._send(handler, 200, json.dumps(result).encode(), "application/x-amz-json-1.1")

    def _error(self, handler, exc: Refused) -> None:
        body = {"__type": exc.code, "Message": exc.message}
        if exc.code == "RequestError":
            body["TurkErrorCode"] = "AWS.MechanicalTurk.InvalidParameterValue"
        self._send(handler, exc.status, json.dumps(body).encode(), "application/x-amz-json-1.1")

    # -- operations -------------------------------------------------------------------------------
    def _hit(self, hit_id: str) -> dict:
        hit = self.hits.get(hit_id)
        if hit is None:
            raise Refused("RequestError", f"Hit {hit_id} does not exist.")
        return hit

    def _hit_json(self, hit: dict) -> dict:
        mine = [a for a in self.assignments.values() if a["HITId"] == hit["HITId"]]
        pending = sum(1 for a in mine if a["AssignmentStatus"] == "Accepted")
        completed = sum(1 for a in mine if a["AssignmentStatus"] in ("Approved", "Rejected", "Submitted"))
        now = time.time()
        if hit["Expiration"] <= now:
            status = "Reviewable" if not pending else "Unassignable"
        else:
            status = "Assignable" if len(mine) < hit["MaxAssignments"] else "Unassignable"
        return {**{k: v for k, v in hit.items() if not k.startswith("_")}, "HITStatus": status,
                "NumberOfAssignmentsPending": pending, "NumberOfAssignmentsCompleted": completed,
                "NumberOfAssignmentsAvailable": max(hit["MaxAssignments"] - len(mine), 0)}

    def op_GetAccountBalance(self, p):
        return {"AvailableBalance": "10000.00"}

    def op_CreateHIT(self, p):
        for field in ("Title", "Description", "Reward", "AssignmentDurationInSeconds", "LifetimeInSeconds"):
            if field not in p:
                raise Refused("ValidationException", f"{field} is required")
        if "Question" not in p:
            raise Refused("RequestError", "A Question or HITLayoutId is required.")
        if "<ExternalQuestion" not in p["Question"] or "<ExternalURL>https://" not in p["Question"]:
            raise Refused("RequestError", "The ExternalQuestion is not valid (an https ExternalURL is required).")
        token = p.get("UniqueRequestToken")
        if token and token in self.tokens:
            raise Refused("RequestError", f"The value for UniqueRequestToken {token!r} has already been used "
                                          f"(HIT {self.tokens[token]}).")
        hit_id = _id()
        now = time.time()
        hit = {"HITId": hit_id, "HITTypeId": _id(), "HITGroupId": _id(), "CreationTime": now,
               "Title": p["Title"], "Description": p["Description"], "Question": p["Question"],
               "Keywords": p.get("Keywords", ""), "MaxAssignments": p.get("MaxAssignments", 1),
               "Reward": p["Reward"], "AutoApprovalDelayInSeconds": p.get("AutoApprovalDelayInSeconds", 2592000),
               "Expiration": now + p["LifetimeInSeconds"],
               "AssignmentDurationInSeconds": p["AssignmentDurationInSeconds"],
               "RequesterAnnotation": p.get("RequesterAnnotation", ""),
               "QualificationRequirements": p.get("QualificationRequirements", []), "HITReviewStatus": "NotReviewed"}
        self.hits[hit_id] = hit
        self.hits_all[hit_id] = hit
        if token:
            self.tokens[token] = hit_id
        return {"HIT": self._hit_json(hit)}

    def op_GetHIT(self, p):
        return {"HIT": self._hit_json(self._hit(p["HITId"]))}

    def op_ListHITs(self, p):
        hits = [self._hit_json(h) for h in self.hits.values()]
        start = int(p.get("NextToken") or 0)
        size = int(p.get("MaxResults") or 10)
        page = hits[start:start + size]
        out = {"HITs": page, "NumResults": len(page)}
        if start + size < len(hits):
            out["NextToken"] = str(start + size)
        return out

    def _assignment_json(self, a):
        return {k: v for k, v in a.items() if v != "" or k == "Answer"}

    def op_ListAssignmentsForHIT(self, p):
        self._hit(p["HITId"])
        statuses = set(p.get("AssignmentStatuses") or ["Submitted", "Approved", "Rejected"])
        found = [self._assignment_json(a) for a in self.assignments.values()
                 if a["HITId"] == p["HITId"] and a["AssignmentStatus"] in statuses]
        start = int(p.get("NextToken") or 0)
        size = int(p.get("MaxResults") or 10)
        page = found[start:start + size]
        out = {"Assignments": page, "NumResults": len(page)}
        if start + size < len(found):
            out["NextToken"] = str(start + size)
        return out

    def _assignment(self, assignment_id):
        a = self.assignments.get(assignment_id)
        if a is None:
            raise Refused("RequestError", f"Assignment {assignment_id} does not exist.")
        return a

    def op_GetAssignment(self, p):
        a = self._assignment(p["AssignmentId"])
        return {"Assignment": self._assignment_json(a), "HIT": self._hit_json(self.hits_all[a["HITId"]])}

    def op_ApproveAssignment(self, p):
        a = self._assignment(p["AssignmentId"])
        if a["AssignmentStatus"] != "Submitted":
            raise Refused("RequestError", f"This operation can be called with a status of: Submitted "
                                          f"(it is {a['AssignmentStatus']}).")
        a.update(AssignmentStatus="Approved", ApprovalTime=time.time(), RequesterFeedback=p.get("RequesterFeedback", ""))
        return {}

    def op_RejectAssignment(self, p):
        a = self._assignment(p["AssignmentId"])
        if not p.get("RequesterFeedback"):
            raise Refused("ValidationException", "RequesterFeedback is required")
        if a["AssignmentStatus"] != "Submitted":
            raise Refused("RequestError", f"This operation can be called with a status of: Submitted "
                                          f"(it is {a['AssignmentStatus']}).")
        a.update(AssignmentStatus="Rejected", RejectionTime=time.time(), RequesterFeedback=p["RequesterFeedback"])
        return {}

    def op_SendBonus(self, p):
        a = self._assignment(p["AssignmentId"])
        if a["WorkerId"] != p["WorkerId"]:
            raise Refused("RequestError", "The worker did not work on this assignment.")
        if a["AssignmentStatus"] not in ("Approved", "Submitted"):
            raise Refused("RequestError", "A bonus can only be paid for an approved or submitted assignment.")
        token = p.get("UniqueRequestToken")
        if token and token in self.bonus_tokens:
            raise Refused("RequestError", f"The value for UniqueRequestToken {token!r} has already been used.")
        Decimal(p["BonusAmount"])
        if token:
            self.bonus_tokens.add(token)
        self.bonuses.append(dict(p))
        return {}

    def op_UpdateExpirationForHIT(self, p):
        hit = self._hit(p["HITId"])
        hit["Expiration"] = float(p["ExpireAt"])
        return {}

    def op_CreateAdditionalAssignmentsForHIT(self, p):
        hit = self._hit(p["HITId"])
        hit["MaxAssignments"] += int(p["NumberOfAdditionalAssignments"])
        return {}

    def op_DeleteHIT(self, p):
        hit = self._hit(p["HITId"])
        state = self._hit_json(hit)
        unreviewed = [a for a in self.assignments.values()
                      if a["HITId"] == hit["HITId"] and a["AssignmentStatus"] in ("Accepted", "Submitted")]
        if state["HITStatus"] != "Reviewable" or unreviewed:
            raise Refused("RequestError", f"This HIT is currently in the state '{state['HITStatus']}'. This operation "
                                          "can be called with a status of: Reviewing, Reviewable, with every "
                                          "assignment approved or rejected.")
        del self.hits[hit["HITId"]]
        return {}

    def op_CreateQualificationType(self, p):
        if any(q["Name"] == p["Name"] for q in self.qualification_types.values()):
            raise Refused("RequestError", "You have already created a QualificationType with this name.")
        qid = _id()
        self.qualification_types[qid] = {"QualificationTypeId": qid, "Name": p["Name"],
                                         "Description": p["Description"], "CreationTime": time.time(),
                                         "QualificationTypeStatus": p["QualificationTypeStatus"]}
        return {"QualificationType": self.qualification_types[qid]}

    def op_ListQualificationTypes(self, p):
        query = (p.get("Query") or "").lower()
        found = [q for q in self.qualification_types.values() if query in q["Name"].lower()]
        return {"QualificationTypes": found, "NumResults": len(found)}

    def op_AssociateQualificationWithWorker(self, p):
        if p["QualificationTypeId"] not in self.qualification_types:
            raise Refused("RequestError", "No such QualificationType.")
        self.qualified.append((p["QualificationTypeId"], p["WorkerId"], p.get("IntegerValue", 1)))
        return {}

    def op_CreateWorkerBlock(self, p):
        self.blocks[p["WorkerId"]] = p["Reason"]
        return {}

    def op_NotifyWorkers(self, p):
        self.notifications.append(dict(p))
        return {"NotifyWorkersFailureStatuses": []}


def _cents(amount: str) -> int:
    return int((Decimal(amount) * 100).to_integral_value())
