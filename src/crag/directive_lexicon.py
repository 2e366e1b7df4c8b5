"""The words that orders to a model are made of (see `crag.directives`), as regular
expression building blocks: who is addressed, what is ordered, where an order's verb
stands, and something to repeat. The lexicon covers English, German, Spanish, French,
Italian, Portuguese and Dutch, in the folded, lower-cased layout of
`crag.directive_rules` (no accents).

Each word list made with `anchor` also records its words' literal heads in `HEADS`: a
rule searches only the units that hold one of its anchors' words.
"""

from __future__ import annotations

import re

#: Literal head -> the anchors (word classes) it starts: a rule searches only the units
#: that hold one of its anchors (a small part of a book), which keeps many patterns cheap.
HEADS: dict[str, set[str]] = {}
#: An alternation -> the words and phrases it was made of.
_WORDS: dict[str, tuple[str, ...]] = {}


def any_of(*alternatives: str, anchor: str = "") -> str:
    """An alternation of lower-case words and phrases (a space matches a run of spaces),
    grouped by first letter: the engine then tries one group per position, not each word.
    With `anchor`, each alternative's literal head marks the units of that anchor."""
    groups: dict[str, list[str]] = {}
    for alt in alternatives:
        if anchor:
            HEADS.setdefault(_head(alt), set()).add(anchor)
        alt = re.sub(r" (?![*+?{])", " +", alt)
        head = alt[0] if alt[0].isalpha() and alt[1:2] not in ("?", "*", "+", "{") else ""
        groups.setdefault(head, []).append(alt[len(head) :] if head else alt)
    parts = [f"{h}(?:{'|'.join(t)})" if h else "|".join(t) for h, t in groups.items()]
    pattern = "(?:" + "|".join(parts) + ")"
    _WORDS[pattern] = alternatives
    return pattern


def _head(alternative: str) -> str:
    """The literal text every match of `alternative` starts with ("ignor" of "ignor(?:a|e)")."""
    run = re.match(r"[a-z'ß]+(?: [a-z'ß]+)*", alternative)
    head = run.group() if run else ""
    if alternative[len(head) : len(head) + 1] in ("?", "*", "{"):
        head = head[:-1]  # its last letter is optional
    head = head.strip()
    if len(head) < 2:
        raise ValueError(f"an anchor needs a literal head of 2 letters or more: {alternative!r}")
    return head


AI = any_of(
    "ai", "ia", "ki", "llms?", "language models?", "large language models?",
    "ai (?:models?|systems?)",
    "ai assistants?", "ai agents?", "assistants?", "chatbots?", "bots?", "chatgpt",
    "gpt(?:-?\\d\\w*)?",
    "claude", "gemini", "copilot", "sprachmodell", "ki-assistent(?:en)?", "assistent(?:en)?",
    "asistente", "modelo de lenguaje", "modele de langage", "modello (?:linguistico|di linguaggio)",
    "assistente", "modelo de linguagem", "taalmodel", "ai-assistent",
    "automated (?:systems?|agents?|readers?|assistants?|tools?)", "crawlers?", "scrapers?",
    anchor="ai",
)  # fmt: skip
# "...the AI reading this document"
READING = any_of(
    "reading", "processing", "summari[sz]ing", "parsing", "analy[sz]ing", "answering", "indexing",
    "scanning", "ingesting", "seeing",
)  # fmt: skip
VOCATIVE_END = r"(?: +" + READING + r"\b[^\n]{0,40}?)? *(?:[:,.!;)\-]|$)"

OVERRIDE = any_of(
    "ignore", "disregard", "forget", "override", "bypass", "discard", "abandon", "neglect",
    "set aside", "pay no attention to", "do not (?:follow|obey|heed)",
    "don'?t (?:follow|obey|heed)",
    "stop following", "do not answer", "don'?t answer", "never answer", "stop answering",
    "ignorier\\w{0,3}", "vergiss", "vergesst", "vergessen", "missacht\\w{0,3}", "verwirf",
    "verwerft", "verwerfen", "beachte nicht", "befolge nicht",
    "ignor(?:a|e|en|ad|ar|ate|ez|er|are|i|em)", "olvid(?:a|e|en|ad|ar)", "omit(?:e|a|an|id|ir)",
    "descart(?:a|e|en|ad|ar)", "haz caso omiso (?:de|a)", "haga caso omiso (?:de|a)",
    "hagan caso omiso (?:de|a)", "no sigas", "no siga", "no sigan",
    "oubli(?:e|ez|er)", "ne tiens pas compte (?:de|des|du)", "ne tenez pas compte (?:de|des|du)",
    "fais abstraction (?:de|des|du)", "faites abstraction (?:de|des|du)", "neglig(?:e|ez|er)",
    "dimentic(?:a|ate|are|hi)", "trascur(?:a|ate|are)", "non seguire", "non considerare",
    "non tenere conto di",
    "esquec(?:a|e|am|er)", "desconsider(?:e|a|em|ar)", "nao siga", "nao sigas", "nao considere",
    "negeer", "negeren", "vergeet", "vergeten", "volg niet", "volgt niet",
    anchor="override",
)  # fmt: skip
INSTRUCTIONS = any_of(
    "instructions?", "prompts?", "rules", "guidelines", "directives?", "directions", "orders",
    "commands", "programming", "system prompt", "system message", "constraints", "guardrails",
    "anweisung(?:en)?", "instruktion(?:en)?", "befehle?", "regeln", "vorgaben", "richtlinien",
    "systemprompts?", "systemanweisung(?:en)?",
    "instrucciones", "instruccion", "indicaciones", "reglas", "ordenes", "directrices", "consignas",
    "consignes", "regles", "ordres",
    "istruzioni", "istruzione", "regole", "indicazioni", "direttive", "ordini",
    "instrucoes", "instrucao", "regras", "orientacoes", "diretrizes", "ordens", "comandos",
    "instructies", "instructie", "regels", "opdrachten", "richtlijnen", "aanwijzingen",
    anchor="instructions",
)  # fmt: skip
# What marks instructions as the ones a model was given (not a CPU's "prefetch instructions").
GIVEN = any_of(
    "previous", "prior", "above", "earlier", "preceding", "foregoing", "original", "initial",
    "your", "system", "developer",
    "vorherige[nrs]?", "bisherige[nrs]?", "obige[nrs]?", "fruhere[nrs]?", "vorangegangene[nrs]?",
    "vorangehende[nrs]?", "deine[nrs]?", "ursprungliche[nrs]?",
    "anteriores", "previas", "tus", "originales", "precedentes", "de arriba",
    "anterieures", "tes", "vos", "ci-dessus", "initiales",
    "precedenti", "tue", "tuoi", "originali", "iniziali", "sopra", "di sopra",
    "suas", "tuas", "teus", "originais", "acima", "iniciais",
    "vorige", "eerdere", "bovenstaande", "voorgaande", "jouw", "oorspronkelijke",
    anchor="given",
)  # fmt: skip
# "the question" is only the user's question when nothing qualifies it ("the question of")
_ENDS = (
    r"(?= *(?:[.,;:!)\]]|$|(?:and|und|y|et|e|en|ed|entirely|completely|altogether|above|asked|"
    r"instead|oben|arriba|ci-dessus|sopra|acima|hierboven|komplett|vollstandig|por completo|"
    r"completamente|completement|volledig)\b))"
)
CONTEXT = any_of(
    "(?:all |everything )?(?:of )?the above" + _ENDS,
    "everything (?:above|before|prior|so far|written (?:above|before))",
    "everything you (?:were|have been) (?:told|given)",
    "the (?:user'?s? |original |actual |real |previous )?(?:question|query|request|task)" + _ENDS,
    "(?:what|anything) (?:you (?:were|have been)|i) (?:told|asked|said)",
    "the (?:previous|prior|preceding|earlier) (?:text|messages?|context|content|conversation)",
    "the (?:previous|prior|preceding|earlier) (?:prompt|input)",
    "the context" + _ENDS, "your (?:task|role|training|programming)",
    "(?:die|deine|ihre) (?:eigentliche |ursprungliche |gestellte |obige )?frage" + _ENDS,
    "(?:die|deine|ihre) aufgabe" + _ENDS,
    "alles (?:oben|obige|vorherige|bisherige|davor|vorher|bisher)",
    "das (?:obige|oben (?:gesagte|stehende|genannte))", "den (?:obigen|vorherigen) text",
    "la (?:pregunta|consulta|tarea)(?: (?:original|anterior|del usuario))?" + _ENDS,
    "todo lo (?:anterior|que precede|de arriba|dicho)", "lo anterior", "el texto anterior",
    "la (?:question|requete|tache)(?: (?:posee|initiale|originale|de l'utilisateur))?" + _ENDS,
    "tout ce qui (?:precede|est (?:au-dessus|ci-dessus)|a ete dit)", "ce qui precede",
    "le texte (?:precedent|ci-dessus)",
    "la (?:domanda|richiesta)(?: (?:originale|dell'utente|precedente))?" + _ENDS,
    "tutto (?:quanto )?(?:sopra|cio che precede|quello che precede)", "quanto sopra",
    "il testo (?:precedente|sopra)",
    "a (?:pergunta|questao|tarefa)(?: (?:original|anterior|do usuario))?" + _ENDS,
    "tudo (?:acima|o que (?:foi dito|veio antes|esta acima))",
    "o (?:texto|conteudo) (?:anterior|acima)",
    "de (?:vraag|opdracht|taak)" + _ENDS,
    "alles (?:hierboven|hiervoor|wat (?:hiervoor|eerder|hierboven))",
    "het bovenstaande", "de vorige tekst",
)  # fmt: skip
# "ignore the above and skip to section 3" moves a reader through a document: no model does.
NOT_NAVIGATION = r"(?! *,? *(?:and +|then +)?(?:skip|go|jump|proceed|continue|turn|move|read on)\b)"
OUTPUT = any_of(
    "say", "output", "print", "reply", "respond", "answer", "write", "type", "return", "repeat",
    "state", "display", "show",
    "sag", "sage", "gib(?: \\w+)? aus", "antworte", "antwortet", "antworten sie", "schreib",
    "schreibe", "schreibt", "drucke", "wiederhole", "nenne",
    "diga", "digan", "imprime", "imprima", "responde", "responda", "contesta", "conteste",
    "escribe",
    "escriba", "repite", "repita", "devuelve", "devuelva", "muestra", "muestre",
    "dis", "dites", "affiche", "affichez", "imprimez", "reponds", "repondez", "ecris", "ecrivez",
    "repete", "repetez", "renvoie", "renvoyez",
    "di'", "dica", "stampa", "stampate", "rispondi", "rispondete", "risponda", "scrivi", "scrivete",
    "scriva", "ripeti", "restituisci", "mostra",
    "diz", "escreva", "escreve", "retorne", "devolva", "mostre",
    "zeg", "antwoord", "antwoordt", "schrijf", "herhaal", "geef", "toon",
    # infinitives, after "you must" ("debes responder", "tu dois repondre")
    "ausgeben", "schreiben", "sagen", "antworten", "decir", "escribir", "imprimir", "responder",
    "contestar", "mostrar", "dire", "ecrire", "afficher", "imprimer", "repondre", "scrivere",
    "stampare", "rispondere", "dizer", "escrever", "zeggen", "schrijven", "antwoorden",
    anchor="output",
)  # fmt: skip
REPLY = any_of(
    "reply", "respond", "answer", "antworte", "antwortet", "antworten sie", "responde", "responda",
    "contesta", "conteste", "reponds", "repondez", "rispondi", "rispondete", "risponda",
    "antwoord", "antwoordt", "antworten", "responder", "contestar", "repondre", "rispondere",
    "antwoorden",
    anchor="reply",
)  # fmt: skip
ONLY = any_of(
    "only", "just", "exactly", "solely", "nothing but", "nothing other than", "nothing else than",
    "nur", "ausschlie(?:ss|ß)lich", "lediglich", "solo", "solamente", "unicamente",
    "exclusivamente",
    "uniquement", "seulement", "rien d'autre que", "soltanto", "esclusivamente", "apenas",
    "somente",
    "alleen", "enkel", "uitsluitend", "nothing else", "nichts anderes", "nada mas",
    "rien d'autre", "nient'altro", "nada alem", "niets anders",
    anchor="only",
)  # fmt: skip
WORD = any_of(
    "word", "phrase", "token", "string", "text", "sentence", "message", "code", "password",
    "wort", "satz", "zeichenkette", "palabra", "frase", "cadena", "texto", "mot", "chaine", "texte",
    "parola", "stringa", "testo", "palavra", "woord", "zin", "tekst",
)  # fmt: skip
SHAPE = any_of(
    "end", "begin", "start", "finish", "conclude", "close", "sign", "prefix", "preface", "append",
    "include", "add", "insert", "mention", "put",
    "beende", "beginne", "starte", "schliesse", "fuge", "nenne",
    "termina", "termine", "empieza", "comienza", "comience", "incluye", "incluya", "anade",
    "agrega",
    "terminez", "commence", "commencez", "inclus", "incluez", "ajoute", "ajoutez",
    "inizia", "comincia", "includi", "aggiungi",
    "comece", "inicie", "inclua", "adicione", "acrescente",
    "eindig", "voeg", "vermeld",
    "terminar", "incluir", "anadir", "agregar", "empezar", "comenzar", "terminer", "inclure",
    "ajouter", "commencer", "terminare", "includere", "aggiungere", "iniziare", "adicionar",
    "comecar",
    anchor="shape",
)  # fmt: skip
# Verb last (German, Dutch): "... alle Antworten mit dem Wort X beenden".
SHAPE_LAST = any_of(
    "beenden", "beginnen", "enthalten", "einfugen", "anhangen", "abschliessen", "erganzen",
    "eindigen", "bevatten", "toevoegen", "afsluiten",
    anchor="shape_last",
)  # fmt: skip
ANSWERS = any_of(
    "answers?", "repl(?:y|ies)", "responses?", "outputs?", "summary", "summaries", "messages?",
    "antwort(?:en)?", "respuestas?", "reponses?", "rispost[ae]", "respostas?", "antwoord(?:en)?",
    anchor="answers",
)  # fmt: skip
YOUR = any_of(
    "your", "every", "each", "all your", "the final", "any", "deine[rnm]?", "ihre[rnm]?",
    "jede[rnm]?", "tu", "su", "cada", "ta", "votre", "chaque", "la tua", "ogni", "sua", "tua",
    "je", "elk", "ieder", "jouw", "uw",
)  # fmt: skip
MODAL = any_of(
    "must", "should", "shall", "has to", "needs to", "will", "muss", "soll", "sollte", "debe",
    "deberia", "tiene que", "doit", "devrait", "deve", "dovrebbe", "deveria", "tem que", "moet",
    "zal",
)  # fmt: skip

# Something to repeat: "the word X", an all-capitals token, a short quotation. Checked in
# the cased text, in a short window after (or around) the order that asks for it.
MARKER = r"(?-i:\b(?:[A-Z][A-Z0-9]{3,}(?:[-_][A-Z0-9]+)*|[A-Z]{2,}(?:[-_][A-Z0-9]+)+)\b)"
QUOTED = r"\"[^\"\n]{1,40}\"|'[^'\n]{1,40}'"
_NAMED = r"(?:(?:the|this|that|a|das|dem|den|la|el|le|il|o|het|de) +)?(?:exact +)?" + WORD + r" +\S"
PAYLOAD = re.compile(f"{_NAMED}|{MARKER}|{QUOTED}", re.IGNORECASE)
STRONG_PAYLOAD = re.compile(f"{_NAMED}|{MARKER}", re.IGNORECASE)

# Imperative position: what may stand just before an order's verb.
CONJUNCTION = any_of(
    "and", "then", "and then", "but", "instead", "now", "just", "simply", "also",
    "und", "dann", "aber", "stattdessen", "jetzt", "nun", "y", "luego", "pero", "en cambio",
    "ahora",
    "et", "puis", "mais", "maintenant", "plutot", "ed", "e", "poi", "ma", "invece", "ora", "adesso",
    "entao", "mas", "agora", "en", "dan", "maar", "nu",
)  # fmt: skip
_PLEASE = any_of(
    "please", "kindly", "bitte", "por favor", "s'il te plait", "s'il vous plait", "svp",
    "per favore", "alsjeblieft", "alstublieft", "graag",
)  # fmt: skip
# Adverbs between an order's opening and its verb ("you must always reply").
_ADVERB = any_of(
    "immediately", "sofort", "now", "always", "only", "just", "simply", "strictly", "also",
    "immer", "nur", "siempre", "solo", "toujours", "seulement", "sempre", "apenas", "altijd",
    "alleen",
)  # fmt: skip
_YOU_MUST = any_of(
    "you (?:must|should|have to|need to|are to|will|shall|are required to)",
    "du (?:musst|sollst)", "sie (?:mussen|sollen)", "ihr (?:musst|sollt)",
    "(?:tu |usted )?(?:debes|debe|deberas|tienes que|tiene que)", "(?:tu dois|vous devez)",
    "(?:devi|dovete)", "(?:voce )?(?:deve|deves|tem que)", "(?:je|jij|u) (?:moet|moeten|zult)",
)  # fmt: skip
_THE_AI = r"(?:the|this|any|every|an?|all|der|die|das|el|la|le|il|o|a|de|het) +" + AI
AI_MUST = _THE_AI + " +" + MODAL
_OPENERS = [CONJUNCTION, _PLEASE, _YOU_MUST, AI_MUST]
IMPERATIVE_BEFORE = re.compile(
    rf"(?:[:;,(\]>]|\b(?:{'|'.join(_OPENERS)}))(?:[^\w\n]|(?:{_PLEASE}|{_ADVERB})\b)*\Z"
)
#: The words such an opening can end with: before any other word, no verb is an order.
OPENER_ENDS = frozenset(
    re.findall(r"[a-z']+", " ".join(w for p in (*_OPENERS[:3], MODAL, _ADVERB) for w in _WORDS[p]))
)
# a unit's opening: punctuation, a bullet, a list number, a comment sign
OPENING = re.compile(
    rf"[^\w\n]*(?:(?:\d{{1,3}}|[a-z])[.)])?[^\w\n]*(?:(?:{_PLEASE}|{_ADVERB})\b[^\w\n]*)*\Z"
)

# (possessive: a long run of punctuation is read once, not once per place it could end)
START = r"^[^\w\n]*+(?:\d{1,3}[.)] *)?"
NOTE = any_of(
    "p\\. ?-?s\\.?", "n\\. ?b\\.?", "note", "notice", "message", "memo", "reminder", "hint",
    "instructions?", "attention", "important", "warning", "psst", "fyi", "aside", "hidden",
    "secret", "special", "urgent", "private", "confidential",
    "hinweis", "notiz", "nachricht", "anmerkung", "achtung", "wichtig(?:e[rs]?)?",
    "nota", "mensaje", "aviso", "atencion", "importante", "advertencia", "recordatorio",
    "remarque", "avis", "rappel", "messaggio", "avviso", "attenzione", "promemoria",
    "mensagem", "atencao", "lembrete", "opmerking", "bericht", "notitie", "let op", "belangrijk",
    "waarschuwing",
)  # fmt: skip
TO = any_of("to", "for", "an", "fur", "para", "a", "al", "ao", "pour", "per", "aan", "voor")
THE = any_of(
    "the", "any", "all", "every", "an?", "you", "die", "den", "das", "jede[rn]?", "alle", "la",
    "el",
    "le", "l'", "il", "lo", "o", "de", "het", "todas? las?", "tous les", "toutes les", "tutti gli",
)  # fmt: skip
GREETING = any_of(
    "dear", "hey", "hi", "hello", "greetings", "attention", "listen", "ok", "okay", "yo",
    "liebe[rs]?", "hallo", "achtung", "querid[oa]", "estimad[oa]", "hola", "atencion", "cher",
    "chere", "bonjour", "salut", "caro", "cara", "ciao", "attenzione", "prezad[oa]", "ola", "oi",
    "atencao", "beste", "lieve", "hoi",
)  # fmt: skip
IF_YOU_ARE = any_of(
    "if you are", "if you're", "in case you are", "wenn du", "wenn sie", "falls du", "si eres",
    "si es usted", "si tu es", "si vous etes", "se sei", "se voce e", "se es", "als je", "als jij",
    "als u",
)  # fmt: skip
_NOTICES = "(?:notice|message|alert|override|instruction|announcement|directive|notification)s?"
_WHO = ("system", "admin", "administrator", "developer", "operator")
NOTICE = any_of(
    *(f"{who} {_NOTICES}" for who in _WHO),
    *(f"{who}[- ]?(?:hinweis|meldung|nachricht|mitteilung|anweisung)" for who in _WHO[:2]),
    *(f"{what}(?: importante)? del (?:sistema|administrador)"
      for what in ("aviso", "mensaje", "alerta", "notificacion", "instruccion", "comunicado")),
    *(f"{what}(?: important)? (?:du )?(?:systeme|administrateur)"
      for what in ("avis", "message", "alerte", "notification", "instruction")),
    *(f"{what}(?: importante)? (?:di|del) (?:sistema|amministratore)"
      for what in ("avviso", "messaggio", "notifica", "istruzione", "comunicazione")),
    *(f"{what}(?: importante)? do (?:sistema|administrador)"
      for what in ("aviso", "mensagem", "alerta", "notificacao", "instrucao")),
    "systeem(?:melding|bericht|mededeling|instructie)", "melding van het systeem",
    "bericht van het systeem", "mededeling van het systeem",
    anchor="notice",
)  # fmt: skip
NEW_INSTRUCTIONS = any_of(
    "new", "updated", "revised", "real", "actual", "true", "secret", "hidden", "additional",
    "neue", "nuevas", "nouvelles", "nuove", "novas", "nieuwe",
)  # fmt: skip
PERSONA = any_of(
    "unrestricted", "unfiltered", "uncensored", "jailbroken", "dan", "evil", "free from \\w+",
    "no longer (?:bound|restricted|an? (?:ai|assistant))", "in (?:developer|dan|god|debug) mode",
    "an? (?:different|new) (?:ai|assistant|model|persona)",
    "uneingeschrankt", "ohne (?:regeln|einschrankungen)", "sin (?:reglas|restricciones)",
    "sans (?:regles|restrictions)", "senza (?:regole|restrizioni)", "sem (?:regras|restricoes)",
    "zonder (?:regels|beperkingen)",
)  # fmt: skip
YOU_ARE_NOW = any_of(
    "you are now", "you're now", "from now on,? you are",
    "du bist (?:jetzt|nun|ab sofort|ab jetzt)",
    "ahora eres", "a partir de ahora eres", "tu es (?:maintenant|desormais)",
    "vous etes (?:maintenant|desormais)", "ora sei", "adesso sei", "d'ora in poi sei",
    "agora (?:voce e|es)", "je bent nu", "jij bent nu",
    anchor="you_are_now",
)  # fmt: skip
SECRETS = any_of(
    "system prompt", "system message", "hidden (?:prompt|instructions)",
    "initial (?:prompt|instructions)", "original instructions", "instructions", "prompt",
    "systemprompt", "instrucciones", "istruzioni", "instrucoes", "instructies", "anweisungen",
    anchor="secrets",
)  # fmt: skip
ACT = any_of(
    "act as", "behave as", "respond as", "pretend (?:that )?you(?:'re| are)", "pretend to be",
    anchor="act",
)  # fmt: skip
MODE = any_of("mode", anchor="mode")
TEMPLATE = r"\[inst\]|<\|(?!im_end|eot_id|endoftext|end\|)[a-z_]{2,20}\|>|<<sys>>|<start_of_turn>"
TEMPLATE_CLOSE = r"\[/inst\]|<\|(?:im_end|eot_id|endoftext|end)\|>|<</sys>>|<end_of_turn>"
HEADING = r"^[^\w\n#]*+#{2,}"

# An order's verb where an order opens: "Please ignore", "Output", "You must".
ORDER_VERB = (
    r"(?:(?:" + _PLEASE + "|" + _ADVERB + r"),? +)*(?:"
    + "|".join([OVERRIDE, OUTPUT, SHAPE, _YOU_MUST, YOU_ARE_NOW])
    + r"|never|always|do not|don'?t|stop|act|pretend|behave|remember|tell|from now on|nie|immer|"
    r"nunca|siempre|jamais|toujours|mai|sempre|nooit|altijd)\b"
)  # fmt: skip
REVEAL = any_of(
    "reveal", "leak", "disclose", "print", "show", "output", "repeat", "display", "tell me",
    "write out", "zeig", "gib", "revela", "muestra", "revele", "montre", "affiche", "rivela",
    "mostra", "toon", "onthul",
)  # fmt: skip
YOURS = any_of(
    "your", "its", "the", "all (?:of )?your", "deine[nm]?", "tus?", "tes", "vos", "tuoi", "le tue",
    "seu", "suas?", "je", "jouw",
)  # fmt: skip
A = r"(?:an?|eine?|una?|une|un'?|uma|um|een)"
